"""Issue 29, findings 2 and 3: what a depositor reads of other collections, who mints API
tokens for whom, and on whose behalf a scoped administrator submits.

Two collections, ``demo`` and ``other``, each with a depositor, a job, an object, admin
actions, a hold, a maintenance window and a delivery; ``other``'s texts all hold SECRET, so a
page that shows any of them to ``demo``'s depositor fails.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.utils import timezone

from batches.models import ApiToken, Collection, Profile
from door.rights import grant_depositor
from inventory.recorder import LocalInventory
from jobs.models import MirrorState
from notifications.models import Delivery, Subscription
from steering.models import AdminAction, AdminActionItem, CollectionScope, MaintenanceWindow
from tests.pages.test_objects_pages import file
from tests.pages.test_pages_batches_jobs import bid, jid, make_batch, make_event, make_job

MINE_ARK, SECRET_ARK = "ark:/99999/fk4mine", "ark:/99999/fk4secret"
MINE_TITLE, SECRET_TITLE = "Mine in demo", "SECRET title of other"
SECRET_LOCAL = "secret-local-id"
SECRET_REASON = "SECRET reason about other"
SECRET_URL = "https://secret.example.org/edited-payload"
SECRET_HOLD = "SECRET hold reason of other"
SECRET_WINDOW = "SECRET window reason of other"
MINE_JOB, SECRET_JOB = jid(1), jid(2)
SECRETS = (SECRET_TITLE, SECRET_ARK, SECRET_LOCAL, SECRET_REASON, SECRET_URL, SECRET_JOB)
SECRETS += (SECRET_HOLD, SECRET_WINDOW, bid(2))


def action(name, scope, reason, *items, user="ops", **fields) -> AdminAction:
    record = AdminAction.objects.create(
        username=user,
        action=name,
        scope=scope,
        reason=reason,
        token=f"t-{AdminAction.objects.count()}",
        total=len(items),
        done=len(items),
        finished=timezone.now(),
        **fields,
    )
    for item_id, collection, detail in items:
        AdminActionItem.objects.create(
            admin_action=record,
            item_id=item_id,
            collection=collection,
            result="done",
            detail=detail,
        )
    return record


@pytest.fixture
def world(db):
    """Everything of both collections; returns the records the tests name."""
    make_batch(1)
    make_batch(2, collection="other", profile="other_profile", title=SECRET_TITLE)
    make_event(make_job(1, title=MINE_TITLE, ark=MINE_ARK), 0, "", "Pending", 5)
    secret = make_job(
        2,
        batch=2,
        collection="other",
        profile="other_profile",
        title=SECRET_TITLE,
        ark=SECRET_ARK,
        local_id=SECRET_LOCAL,
        locked=True,
    )
    make_event(secret, 0, "", "Pending", 5, message=SECRET_TITLE)
    inventory = LocalInventory()
    for ark, collection, title, job, local in (
        (MINE_ARK, "demo", MINE_TITLE, MINE_JOB, "mine-local"),
        (SECRET_ARK, "other", SECRET_TITLE, SECRET_JOB, SECRET_LOCAL),
    ):
        inventory.bind_local_id(collection, local, ark)
        inventory.record(
            ark=ark,
            version=1,
            job_id=job,
            collection=collection,
            files=[file("producer/a.txt", "added")],
            metadata={"erc_what": title},
            mode="add",
        )
    other = action(
        "job.edit_resume",
        "job",
        SECRET_REASON,
        (SECRET_JOB, "other", f"payload_url: {SECRET_URL}"),
        params={"payload_url": SECRET_URL},
    )
    mine = action("job.hold", "job", "demo reason", (MINE_JOB, "demo", "held"))
    mixed = action(
        "job.hold",
        "job",
        "both collections",
        (MINE_JOB, "demo", "held"),
        (SECRET_JOB, "other", "held"),
        selection=f"q={SECRET_LOCAL}",
    )
    pause = action("queue.pause", "queue", "queue-wide pause", ("ingest", "", "paused"))
    cleanup = action(
        "cleanup", "queue", "weekly cleanup", (SECRET_JOB, "", "deleted"), report={"x": SECRET_JOB}
    )
    hold = action("collection.hold", "collection", SECRET_HOLD, ("other", "other", "held by ops"))
    Collection.objects.create(mnemonic="other", held=True, held_by="ops", held_reason=SECRET_HOLD)
    Collection.objects.create(mnemonic="demo", held=True, held_by="ops", held_reason="demo hold")
    now = timezone.now()
    for scope, collection, reason in (
        ("collection", "other", SECRET_WINDOW),
        ("collection", "demo", "demo window"),
        ("queue", "", "queue window"),
    ):
        MaintenanceWindow.objects.create(
            scope=scope,
            collection=collection,
            start=now - timedelta(hours=1),
            end=now + timedelta(hours=1),
            reason=reason,
            created_by_name="ops",
        )
    subscription = Subscription.objects.create(
        bid=bid(2), channel="webhook", target=SECRET_URL, profile="other_profile"
    )
    delivery = Delivery.objects.create(
        subscription=subscription, event_id="e1", kind="job", item=SECRET_JOB, to_status="Stored"
    )
    MirrorState.objects.create(
        name="locks",
        at=now,
        detail={
            "paused": False,
            "locks": [
                {"path": f"/locks/storage/{SECRET_ARK}", "data": SECRET_JOB, "owner": "s1"},
                {"path": f"/jobs/{SECRET_JOB}/lock", "kind": "job", "ctime": now.isoformat()},
            ],
        },
    )
    MirrorState.objects.create(
        name="consistency",
        at=now,
        detail={
            "total": 1,
            "repaired": 0,
            "unrepaired": 1,
            "findings": [{"kind": "orphan", "path": f"/jobs/{SECRET_JOB}", "reason": SECRET_TITLE}],
        },
    )
    return {
        "other": other,
        "mine": mine,
        "mixed": mixed,
        "pause": pause,
        "cleanup": cleanup,
        "hold": hold,
        "delivery": delivery,
    }


@pytest.fixture
def dana(client, django_user_model):
    """demo's depositor, signed in."""
    user = django_user_model.objects.create_user("dana")
    grant_depositor(user, ["demo"])
    client.force_login(user)
    return client


def shows_none_of_other(response, asked: str = "") -> None:
    """``asked``: the URL, whose own words the page may repeat (a filter's value)."""
    assert response.status_code == 200, response.status_code
    body = b"".join(response) if response.streaming else response.content
    body = body.decode()
    leaked = [s for s in SECRETS if s in body and s not in asked]
    assert not leaked, leaked


# --- finding 2: every list, export and page a depositor reads ---------------------------

LISTS = [
    "/objects/",
    "/objects/?collection=other",
    f"/objects/?q={SECRET_ARK}",
    f"/objects/?q={SECRET_LOCAL}",
    "/objects/?q=SECRET",
    "/actions/",
    "/actions/?collection=other",
    f"/actions/?job={SECRET_JOB}",
    "/actions/export.csv",
    "/actions/export.csv?collection=other",
    f"/actions/export.csv?job={SECRET_JOB}",
    "/windows/",
    "/",
    "/collections/",
    "/locks/",
    "/consistency/",
    "/jobs/",
    "/batches/",
    "/history/export.csv",
    "/history/export.json",
]


@pytest.mark.parametrize("url", LISTS)
def test_a_depositor_reads_nothing_of_another_collection(dana, world, url):
    shows_none_of_other(dana.get(url), url)


def test_a_depositor_still_reads_their_own_collection(dana, world):
    assert MINE_TITLE in dana.get("/objects/").content.decode()
    assert dana.get(f"/objects/{MINE_ARK}/").status_code == 200
    audit = dana.get("/actions/").content.decode()
    assert "demo reason" in audit and "both collections" in audit and "queue-wide pause" in audit
    assert "demo reason" in dana.get("/actions/export.csv").content.decode()
    assert "demo window" in dana.get("/windows/").content.decode()
    assert "queue window" in dana.get("/windows/").content.decode()
    assert "demo hold" in dana.get("/collections/").content.decode()


DETAILS = [
    f"/objects/{SECRET_ARK}/",
    f"/jobs/{SECRET_JOB}/",
    f"/jobs/{SECRET_JOB}/history.csv",
    f"/batches/{bid(2)}/",
    f"/batches/{bid(2)}/history.json",
]


@pytest.mark.parametrize("url", DETAILS)
def test_another_collections_item_is_404_as_if_it_did_not_exist(dana, world, url):
    response = dana.get(url)
    assert response.status_code == 404
    assert SECRET_TITLE not in response.content.decode()


@pytest.mark.parametrize("name", ["other", "hold"])
def test_another_collections_action_is_404(dana, world, name):
    response = dana.get(f"/actions/{world[name].pk}/")
    assert response.status_code == 404
    assert SECRET_REASON not in response.content.decode()


@pytest.mark.parametrize("name", ["mine", "mixed", "pause", "cleanup"])
def test_an_action_on_mine_or_the_whole_queue_shows_none_of_others_items(dana, world, name):
    shows_none_of_other(dana.get(f"/actions/{world[name].pk}/"))


def test_another_collections_delivery_is_404(dana, world):
    assert dana.get(f"/notifications/deliveries/{world['delivery'].pk}/resend/").status_code == 404


def test_a_reader_of_every_collection_still_reads_everything(client, django_user_model, world):
    user = django_user_model.objects.create_user("vera")
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    client.force_login(user)
    assert SECRET_TITLE in client.get("/objects/").content.decode()
    assert client.get(f"/objects/{SECRET_ARK}/").status_code == 200
    assert SECRET_REASON in client.get("/actions/").content.decode()
    assert SECRET_URL in client.get("/actions/export.csv").content.decode()
    assert SECRET_URL in client.get(f"/actions/{world['other'].pk}/").content.decode()
    assert SECRET_WINDOW in client.get("/windows/").content.decode()
    assert SECRET_HOLD in client.get("/collections/").content.decode()


# --- finding 3: an API token is minted for oneself, unless by a superuser ----------------


@pytest.fixture
def token_adder(client, django_user_model):
    """A staff user whose only permission is adding API tokens, signed in."""
    user = django_user_model.objects.create_user("adder", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="add_apitoken"))
    client.force_login(user)
    return user


def test_a_token_adder_cannot_mint_a_token_for_someone_else(client, django_user_model, token_adder):
    root = django_user_model.objects.create_superuser("root", password="pw")
    form = client.get("/admin/batches/apitoken/add/")
    assert form.status_code == 200
    assert f'value="{root.pk}"' not in form.content.decode()
    client.post("/admin/batches/apitoken/add/", {"user": root.pk, "name": "mine now"})
    assert not ApiToken.objects.filter(user=root).exists()


def test_a_token_adder_mints_a_token_for_themselves(client, token_adder):
    client.post("/admin/batches/apitoken/add/", {"user": token_adder.pk, "name": "own"})
    assert ApiToken.objects.filter(user=token_adder, name="own").exists()


def test_a_token_changer_cannot_move_a_token_or_rotate_anothers(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw")
    user = django_user_model.objects.create_user("changer", is_staff=True)
    for codename in ("view_apitoken", "change_apitoken"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    own, _ = ApiToken.issue(user, "own")
    theirs, _ = ApiToken.issue(root, "root's")
    client.post(
        f"/admin/batches/apitoken/{own.pk}/change/",
        {"user": root.pk, "name": "own", "revoked": ""},
    )
    assert ApiToken.objects.get(pk=own.pk).user == user
    before = ApiToken.objects.get(pk=theirs.pk).key_hash
    rotated = client.post(
        "/admin/batches/apitoken/",
        {"action": "rotate", "_selected_action": [theirs.pk]},
        follow=True,
    )
    assert ApiToken.objects.get(pk=theirs.pk).key_hash == before
    assert not [m for m in rotated.context["messages"] if "not shown again" in str(m)]


def test_a_superuser_mints_a_token_for_someone_else(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw")
    other = django_user_model.objects.create_user("someone")
    client.force_login(root)
    client.post("/admin/batches/apitoken/add/", {"user": other.pk, "name": "for them"})
    assert ApiToken.objects.filter(user=other, name="for them").exists()


# --- on_behalf_of: only for someone who may submit to that collection --------------------

GOOD = {"profile": "demo", "type": "file", "payload_url": "https://example.org/a.txt"}


@pytest.fixture
def scoped_admin(django_user_model, process_store):
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    admin = django_user_model.objects.create_user("boss")
    admin.groups.add(Group.objects.get_or_create(name="administrator")[0])
    CollectionScope.objects.create(user=admin, collections=["demo"])
    olga = django_user_model.objects.create_user("olga")
    grant_depositor(olga, ["other"])
    return admin


def refused_for_olga(problems: list[str]) -> bool:
    return any("olga may not submit to collection 'demo'" in p for p in problems)


def test_the_api_refuses_on_behalf_of_someone_who_may_not_submit_there(
    client, scoped_admin, process_store
):
    key = ApiToken.issue(scoped_admin, "tests")[1]
    response = client.post(
        "/api/v1/batches",
        json.dumps(GOOD | {"on_behalf_of": "olga"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 403, response.content
    assert refused_for_olga(response.json()["errors"]), response.json()
    assert process_store.batches.list_batch_ids() == []


def test_the_form_has_no_on_behalf_of_and_submits_as_the_signed_in_user(
    scoped_admin, process_store
):
    client = Client()
    client.force_login(scoped_admin)
    client.post("/submit/", GOOD | {"on_behalf_of": "olga", "submission_mode": "add"})
    (batch,) = process_store.batches.list_batch_ids()
    assert process_store.batches.get_batch(batch).submission["submitter"] == "boss"


def test_the_command_refuses_on_behalf_of_someone_who_may_not_submit_there(
    scoped_admin, process_store
):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="olga may not submit to collection 'demo'"):
        call_command(
            "submit",
            "--as-user=boss",
            "--on-behalf-of=olga",
            "--profile=demo",
            "--type=file",
            "--payload-url=https://example.org/a.txt",
        )
    assert process_store.batches.list_batch_ids() == []


def test_on_behalf_of_a_depositor_of_the_collection_still_works(
    client, scoped_admin, django_user_model, process_store
):
    grant_depositor(django_user_model.objects.create_user("dana"), ["demo"])
    key = ApiToken.issue(scoped_admin, "tests")[1]
    response = client.post(
        "/api/v1/batches",
        json.dumps(GOOD | {"on_behalf_of": "dana"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 201, response.content
