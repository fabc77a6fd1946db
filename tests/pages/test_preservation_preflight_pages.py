"""The pre-flight on the "Check a manifest" page (issue 36, part 1): a depositor picks one of
the profiles they may submit to and sees what the batch would do; an object or job of a
collection outside their scope is never shown. Its API:
tests/door/test_preservation_preflight_api.py."""

from __future__ import annotations

from html import unescape

import pytest

from batches.models import Profile
from door.rights import grant_depositor
from inventory.models import InventoryObject, LocalIdentifier
from tests.pages.test_preservation_preflight import checkm

PAGE = "/manifests/check/"


@pytest.fixture(autouse=True)
def _site(db, settings):
    settings.MQ_BREAKER_THRESHOLD = 0
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    Profile.objects.create(name="other", collection="other", minter_shoulder="ark:/99999/fk4")
    InventoryObject.objects.create(ark="ark:/99999/fk4mine", collection="demo", title="Mine")
    LocalIdentifier.objects.create(collection="demo", local_id="L-1", ark="ark:/99999/fk4mine")
    InventoryObject.objects.create(ark="ark:/99999/fk4their", collection="other", title="Theirs")
    LocalIdentifier.objects.create(collection="other", local_id="L-1", ark="ark:/99999/fk4their")


@pytest.fixture
def person(django_user_model):
    user = django_user_model.objects.create_user("dee", password="pw")
    grant_depositor(user, ["demo"])
    return user


DATA = checkm("http://h.example.org/a | 4 | a | L-1")


def test_the_page_offers_only_the_profiles_one_may_submit_to(client, person):
    client.force_login(person)
    html = client.get(PAGE).content.decode()
    assert '<option value="demo"' in html and '<option value="other"' not in html


def test_the_page_shows_the_preflight_of_the_chosen_profile(client, person, settings):
    settings.MQ_PREFLIGHT_HEAD_SAMPLE = 0
    client.force_login(person)
    page = client.post(PAGE, {"text": DATA.decode(), "profile": "demo"})
    html = page.content.decode()
    assert page.status_code == 200 and "Pre-flight" in html
    assert "ark:/99999/fk4mine" in html and "Mine" in html
    assert "fk4their" not in html and "Theirs" not in html


def test_the_page_refuses_a_profile_outside_ones_scope(client, person):
    client.force_login(person)
    page = client.post(PAGE, {"text": DATA.decode(), "profile": "other"})
    html = unescape(page.content.decode())
    assert page.status_code == 403 and "may not submit to collection 'other'" in html
    assert "Theirs" not in html and "Pre-flight:" not in html
    assert "Valid: 1 row" in html and "L-1\n#%eof\n</textarea>" in html  # checked, text kept


def test_without_a_profile_there_is_no_preflight(client, person):
    client.force_login(person)
    html = client.post(PAGE, {"text": DATA.decode()}).content.decode()
    assert "Valid" in html and "Pre-flight" not in html
