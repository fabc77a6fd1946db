"""The access queue's API: list and one request from the mirror; requeue, delete, cleanup,
pause and unpause with a reason, the version the caller read, a dry run and an id that
makes a retry do nothing twice; the same roles and audit as the pages."""

from __future__ import annotations

import json

import pytest

from batches.models import ApiToken
from mirror import access as mirrored
from steering.models import AdminAction
from tests.merrittzk_access import MerrittAccess
from tests.pages import test_steering_actions as base
from tests.pages.test_access_queue_steering import request_in, status_of

queue, people = base.queue, base.people


@pytest.fixture
def merritt(queue) -> MerrittAccess:
    zk = MerrittAccess(queue.client)
    zk.init_nodes()
    return zk


def auth(user) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(user, 'tests')[1]}"}


def post(client, url: str, headers: dict, **body):
    return client.post(url, json.dumps(body), content_type="application/json", **headers)


def test_list_and_detail_from_the_mirror(client, merritt, queue, people):
    key = request_in(merritt, "Failed", url="https://merritt.example/dl/a.zip")
    request_in(merritt, "Completed", "large")
    mirrored.refresh(queue.client)
    headers = auth(people["viewer"])
    listed = client.get("/api/v1/access?status=Failed", **headers).json()
    assert listed["count"] == 1 and listed["requests"][0]["id"] == key
    assert listed["paused"] == {"small": False, "large": False}
    row = listed["requests"][0]
    assert row["status"] == "Failed" and row["size"] == 17079 and row["delivery_node"] == 7777
    assert row["url"] == "https://merritt.example/dl/a.zip" and row["locked"] is False
    q, qid = key.split("/")
    one = client.get(f"/api/v1/access/{q}/{qid}", **headers).json()
    assert one["message"] == "assembly broke" and one["token_fields"]["delivery-node"] == 7777
    assert [h["to"] for h in one["history"]][-1] == "Failed"
    assert client.get("/api/v1/access/small/qid9999999999", **headers).status_code == 404
    assert client.get("/api/v1/access").status_code == 401
    assert client.get("/api/v1/access?status=Nope", **headers).status_code == 400


def test_requeue_with_reason_and_version_is_audited_and_a_retry_does_nothing_twice(
    client, merritt, people
):
    key = request_in(merritt, "Failed")
    q, qid = key.split("/")
    headers = auth(people["operator"])
    url = f"/api/v1/access/{q}/{qid}/requeue"
    dry = post(client, url, headers, dry_run=True).json()
    assert dry["dry_run"] is True and dry["items"][0]["applies"] is True
    version = dry["items"][0]["version"]
    assert status_of(merritt, key) == "Failed" and not AdminAction.objects.exists()
    missing = post(client, url, headers).json()["errors"]
    assert any("reason is required" in e for e in missing)
    assert any("version is required" in e for e in missing)
    done = post(client, url, headers, reason="node back", version=version, request_id="r-1")
    assert done.status_code == 200 and done.json()["done"] == 1
    assert done.json()["items"][0]["after"] == "Pending" and status_of(merritt, key) == "Pending"
    again = post(client, url, headers, reason="node back", version=version, request_id="r-1")
    assert again.json()["action"] == done.json()["action"] and AdminAction.objects.count() == 1
    record = AdminAction.objects.get()
    assert (record.username, record.reason, record.action) == (
        "otto",
        "node back",
        "access.requeue",
    )


def test_a_stale_version_is_refused_and_nothing_is_written(client, merritt, people):
    key = request_in(merritt, "Failed")
    q, qid = key.split("/")
    headers = auth(people["operator"])
    url = f"/api/v1/access/{q}/{qid}/delete"
    version = post(client, url, headers, dry_run=True).json()["items"][0]["version"]
    merritt.set_status(q, qid, "Processing")  # Merritt's service took it meanwhile
    merritt.set_status(q, qid, "Failed", "again")
    stale = post(client, url, headers, reason="gone", version=version)
    assert stale.status_code == 409
    assert "changed since" in stale.json()["items"][0]["detail"]
    assert status_of(merritt, key) == "Failed"


def test_roles_and_refusals(client, merritt, people):
    key = request_in(merritt, "Pending")
    q, qid = key.split("/")
    viewer = post(
        client, f"/api/v1/access/{q}/{qid}/requeue", auth(people["viewer"]), reason="x", version=0
    )
    assert viewer.status_code == 403 and "operator role" in viewer.json()["errors"][0]
    headers = auth(people["operator"])
    wrong = post(client, f"/api/v1/access/{q}/{qid}/requeue", headers, reason="x", version=0)
    assert wrong.status_code == 409 and "it is Pending" in wrong.json()["errors"][0]
    assert (
        post(client, "/api/v1/access/queues/medium/pause", headers, reason="x").status_code == 404
    )
    assert post(client, f"/api/v1/access/{q}/{qid}/explode", headers, reason="x").status_code == 404


def test_pause_unpause_and_cleanup(client, merritt, people):
    done = request_in(merritt, "Completed")
    failed = request_in(merritt, "Failed", "large")
    headers = auth(people["operator"])
    paused = post(client, "/api/v1/access/queues/small/pause", headers, reason="upgrade")
    assert paused.status_code == 200 and merritt.paused("small")
    twice = post(client, "/api/v1/access/queues/small/pause", headers, reason="upgrade")
    assert twice.status_code == 409 and "it is Paused" in twice.json()["errors"][0]
    post(client, "/api/v1/access/queues/small/unpause", headers, reason="done")
    assert not merritt.paused("small")
    young = post(client, "/api/v1/access/cleanup", headers, reason="tidy", older_than_days=7)
    assert young.status_code == 200 and young.json()["done"] == 0
    dry = post(client, "/api/v1/access/cleanup", headers, older_than_days=0, dry_run=True).json()
    assert [i["item"] for i in dry["items"]] == [done]
    gone = post(client, "/api/v1/access/cleanup", headers, reason="tidy", older_than_days=0)
    assert gone.json()["done"] == 1 and merritt.list_jobs("small") == []
    assert merritt.list_jobs("large") == [failed.split("/")[1]]


@pytest.mark.parametrize(
    "raw", ["NaN", "Infinity", "-Infinity", "1e10", "36501", "true", "false", "-1", '"7"']
)
def test_bulk_cleanup_refuses_an_age_that_is_not_a_number_of_days_in_range(
    client, merritt, people, raw
):
    request_in(merritt, "Completed")
    body = f'{{"reason": "tidy", "older_than_days": {raw}}}'
    answer = client.post(
        "/api/v1/access/cleanup", body, content_type="application/json", **auth(people["operator"])
    )
    assert answer.status_code == 400
    assert "older_than_days" in answer.json()["errors"][0]
    assert not AdminAction.objects.exists()


def test_two_calls_whose_long_ids_share_a_beginning_are_two_calls(client, merritt, people):
    first = request_in(merritt, "Failed")
    second = request_in(merritt, "Failed")
    headers = auth(people["operator"])
    stem = "x" * 70
    for key, tail in ((first, "a"), (second, "b")):
        q, qid = key.split("/")
        url = f"/api/v1/access/{q}/{qid}/delete"
        version = post(client, url, headers, dry_run=True).json()["items"][0]["version"]
        done = post(client, url, headers, reason="gone", version=version, request_id=stem + tail)
        assert done.status_code == 200 and done.json()["done"] == 1
    assert AdminAction.objects.count() == 2
    assert status_of(merritt, first) == status_of(merritt, second) == "Deleted"
