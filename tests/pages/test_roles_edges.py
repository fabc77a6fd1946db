"""Issue 32, minor "Roles at the edges": an account with no role reads nothing and is told
whom to ask; the administrator role opens the Django admin; a collection scope is ticked,
not typed as JSON."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from batches.models import Collection
from door.rights import grant_depositor
from steering.models import CollectionScope
from ui.reading_scope import readable_collections


@pytest.fixture
def group(db):
    return lambda name: Group.objects.get_or_create(name=name)[0]


@pytest.fixture
def boss(django_user_model, group):
    user = django_user_model.objects.create_user("boss", email="boss@example.org")
    user.groups.add(group("administrator"))
    return user


def test_an_account_in_no_group_reads_nothing_and_is_told_whom_to_ask(
    client, django_user_model, boss
):
    nobody = django_user_model.objects.create_user("newcomer")
    assert readable_collections(nobody) == set()
    client.force_login(nobody)
    for url in ("/", "/jobs/", "/batches/", "/objects/", "/actions/"):
        page = client.get(url)
        assert page.status_code == 403, url
        text = page.content.decode()
        assert "You have no role yet" in text and "boss@example.org" in text
        assert page["X-Frame-Options"] == "DENY"  # the headers of every other page
    roles = client.get("/help/roles")
    assert roles.status_code == 200 and "You have no role yet" in roles.content.decode()


def test_taking_a_depositor_out_of_their_group_never_widens_what_they_read(
    django_user_model, group
):
    dana = django_user_model.objects.create_user("dana")
    grant_depositor(dana, ["demo"])
    assert readable_collections(dana) == {"demo"}
    dana.groups.clear()
    dana = django_user_model.objects.get(pk=dana.pk)  # groups are read once per user object
    assert readable_collections(dana) == set()


def test_a_superuser_in_no_group_still_reads_everything(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw")
    assert readable_collections(root) is None
    client.force_login(root)
    assert client.get("/jobs/").status_code == 200


def test_the_administrator_role_opens_the_django_admin_and_leaving_it_closes_it(
    client, django_user_model, group
):
    ada = django_user_model.objects.create_user("ada")
    ada.groups.add(group("administrator"))
    ada.refresh_from_db()
    assert ada.is_staff
    client.force_login(ada)
    assert client.get("/admin/").status_code == 200
    assert client.get("/admin/auth/user/").status_code == 200
    assert client.get("/admin/steering/collectionscope/add/").status_code == 200
    group("administrator").user_set.remove(ada)  # from the group's side this time
    ada.refresh_from_db()
    assert not ada.is_staff
    group("administrator").user_set.add(ada)
    ada.refresh_from_db()
    assert ada.is_staff


def test_an_administrator_cannot_make_anyone_a_superuser(client, django_user_model, boss):
    boss.refresh_from_db()
    client.force_login(boss)
    olga = django_user_model.objects.create_user("olga")
    form = client.get(f"/admin/auth/user/{olga.pk}/change/").content.decode()
    assert 'name="is_superuser"' not in form
    assert client.get(f"/admin/auth/user/{olga.pk}/password/").status_code == 403
    assert client.get(f"/admin/auth/user/{boss.pk}/password/").status_code == 200  # their own
    root = django_user_model.objects.create_superuser("root", password="pw")
    shown = client.get(f"/admin/auth/user/{root.pk}/change/").content.decode()
    assert 'name="username"' not in shown  # a superuser's account is read, not changed


def test_existing_administrators_become_staff_when_migrated(django_user_model, boss):
    django_user_model.objects.filter(pk=boss.pk).update(is_staff=False)  # as before 0008
    executor = MigrationExecutor(connection)
    state = executor.loader.project_state(("steering", "0008_administrators_are_staff"))
    from importlib import import_module

    migration = import_module("steering.migrations.0008_administrators_are_staff")
    migration.grant(state.apps, None)
    boss.refresh_from_db()
    assert boss.is_staff
    assert (
        Group.objects.get(name="administrator")
        .permissions.filter(codename="change_collectionscope")
        .exists()
    )


def test_with_no_collection_known_the_scope_form_says_what_to_do_first(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    form = client.get("/admin/steering/collectionscope/add/").content.decode()
    assert "No collection is known yet" in form


def test_a_collection_scope_is_ticked_from_the_known_collections(client, django_user_model):
    Collection.objects.create(mnemonic="demo")
    Collection.objects.create(mnemonic="other")
    root = django_user_model.objects.create_superuser("root", password="pw")
    dana = django_user_model.objects.create_user("dana")
    client.force_login(root)
    form = client.get("/admin/steering/collectionscope/add/").content.decode()
    assert 'type="checkbox" name="collections" value="demo"' in form
    assert 'value="other"' in form and "e.g. [&quot;demo&quot;]" not in form
    answer = client.post(
        "/admin/steering/collectionscope/add/", {"user": dana.pk, "collections": ["demo"]}
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert CollectionScope.objects.get(user=dana).collections == ["demo"]


def test_another_groups_change_leaves_a_hand_made_staff_account_as_it_was(django_user_model, group):
    adder = django_user_model.objects.create_user("adder", is_staff=True)
    adder.groups.add(group("viewer"))
    adder.groups.clear()
    adder.refresh_from_db()
    assert adder.is_staff
    adder.groups.add(group("administrator"))
    adder.groups.clear()
    adder.refresh_from_db()
    assert not adder.is_staff
