"""The queue at a moment over the API: ``/api/v1/moment?at=`` and ``?at=&to=`` as JSON, the
items of a state, the refusals as 400 with the reason, a token's reading scope, no token."""

from __future__ import annotations

import pytest

from batches.models import ApiToken
from door.rights import grant_depositor
from tests.mirror.test_preservation_moment import at, audit, make_record
from tests.roles import viewer

pytestmark = pytest.mark.django_db


@pytest.fixture
def record(db):
    make_record()


def bearer(user) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(user, 'tests')[1]}"}


@pytest.fixture
def reader(django_user_model):
    return bearer(viewer(django_user_model.objects.create_user("librarian")))


def iso(seconds: int) -> str:
    return at(seconds).isoformat().replace("+00:00", "Z")


def test_a_moment_as_json(client, reader, record):
    audit("collection.hold", "collection", "demo", 100)
    body = client.get("/api/v1/moment", {"at": iso(250)}, **reader).json()
    assert body["at"] == iso(250)
    assert body["jobs"]["by_state"] == {"Estimating": 1, "Failed": 1, "Held": 1, "Pending": 1}
    assert body["jobs"]["uncertain"] == 1
    assert body["batches"]["by_state"] == {"Processing": 1}
    assert [h["target"] for h in body["holds"]] == ["demo"]
    assert body["pause"] is None and body["locks"]["recorded"] is True


def test_the_locks_held_at_a_moment_as_json(client, reader, record):
    from mirror.locks import refresh_locks
    from tests.mirror.test_preservation_moment_locks import HOLD, node

    refresh_locks({HOLD: node(10)}, at(20))
    body = client.get("/api/v1/moment", {"at": iso(15)}, **reader).json()
    assert [lock["path"] for lock in body["locks"]["held"]] == [HOLD]
    body = client.get("/api/v1/moment", {"at": iso(5), "to": iso(30)}, **reader).json()
    assert [lock["path"] for lock in body["locks"]["taken"]] == [HOLD]


def test_the_items_of_a_state(client, reader, record):
    body = client.get(
        "/api/v1/moment", {"at": iso(250), "kind": "job", "state": "Pending"}, **reader
    ).json()
    assert body["items"] == [{"jid": "jid0000000005", "collection": "demo", "now": "Storing"}]


def test_a_diff_as_json(client, reader, record):
    body = client.get("/api/v1/moment", {"at": iso(100), "to": iso(330)}, **reader).json()
    assert body["jobs"]["changed"]["total"] == 4
    paths = {i["jid"]: i["path"] for i in body["jobs"]["changed"]["items"]}
    assert paths["jid0000000004"] == ["Pending", "Failed", "Deleted"]
    assert body["batches"]["at_to"] == {"Completed": 1}


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"at": "2999-01-01T00:00Z"}, "in the future"),
        ({"at": "2001-01-01T00:00Z"}, "before the recorded history begins"),
        ({"at": "later"}, "not a time"),
        ({}, "at is required"),
        ({"at": "2026-03-10T12:05:00Z", "to": "2026-03-10T12:01:00Z"}, "must come after"),
        ({"at": "2026-03-10T12:05:00Z", "kind": "robot", "state": "Pending"}, "kind"),
    ],
)
def test_refusals_are_400_with_the_reason(client, reader, record, params, words):
    answer = client.get("/api/v1/moment", params, **reader)
    assert answer.status_code == 400
    assert words in answer.json()["errors"][0]


def test_a_depositor_token_reads_its_collections_only(client, django_user_model, record):
    dana = django_user_model.objects.create_user("dana")
    grant_depositor(dana, ["demo"])
    body = client.get("/api/v1/moment", {"at": iso(250)}, **bearer(dana)).json()
    assert "Held" not in body["jobs"]["by_state"]
    assert set(body["jobs"]["by_collection"]) == {"demo"}


def test_no_token_is_401(client, record):
    assert client.get("/api/v1/moment", {"at": iso(250)}).status_code == 401


def test_a_depositor_token_is_not_told_other_collections_removed_items(
    client, django_user_model, record
):
    from steering.models import AdminAction, AdminActionItem

    done = AdminAction.objects.create(
        username="admin", action="cleanup", scope="queue", reason="private words", token="c7"
    )
    AdminAction.objects.filter(pk=done.pk).update(started=at(450))
    AdminActionItem.objects.create(admin_action=done, item_id="jid0000000077", result="done")
    dana = django_user_model.objects.create_user("dana")
    grant_depositor(dana, ["demo"])
    for params in ({"at": iso(250)}, {"at": iso(100), "to": iso(330)}):
        body = client.get("/api/v1/moment", params, **bearer(dana)).json()
        assert body["missing"]["jobs"] is None and "removed" in body["missing"]["text"]
        assert "jid0000000077" not in str(body) and "private words" not in str(body)
    whole = client.get(
        "/api/v1/moment",
        {"at": iso(250)},
        **bearer(viewer(django_user_model.objects.create_user("lib"))),
    ).json()
    assert whole["missing"]["jobs"] == 1 and "jid0000000077" in whole["missing"]["text"]
