"""Approval before a batch starts (issue 36, part 1) over the API and the command line: the
submitter is told the batch waits, an operator's token lists and decides (reason, version,
scope, audit), and ``manage.py approve_batch`` does the same."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from batches.models import ApiToken, Profile
from door import arrival
from door.rights import grant_depositor
from mirror import facade as mirror
from steering.models import AdminAction

GOOD = {"profile": "slow", "type": "file", "payload_url": "https://example.org/a.jpg"}


@pytest.fixture
def queue(process_store, monkeypatch):
    Profile.objects.create(
        name="slow", collection="demo", minter_shoulder="ark:/99999/fk4", approval_required=True
    )
    monkeypatch.setattr(arrival, "summarise", lambda data, **kw: {"objects": 1})
    return process_store


def person(name: str, group: str):
    user = get_user_model().objects.create_user(name, password="pw")
    user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


@pytest.fixture
def tokens(db):
    depositor = person("dora", "depositor")
    grant_depositor(depositor, ["demo"])
    operator = person("otto", "operator")
    return {
        "depositor": ApiToken.issue(depositor, "t")[1],
        "operator": ApiToken.issue(operator, "t")[1],
    }


def call(client, token, method, url, body=None):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    if method == "get":
        return client.get(url, **auth)
    return client.post(url, json.dumps(body), content_type="application/json", **auth)


def arrived(client, queue, tokens, batch_id="b-1") -> str:
    answer = call(
        client, tokens["depositor"], "post", "/api/v1/batches", GOOD | {"batchID": batch_id}
    )
    assert answer.status_code == 201 and answer.json()["awaiting_approval"] is True
    bid = answer.json()["batch_id"]
    mirror.apply_batch(queue.batches.get_batch(bid))
    return bid


def test_the_depositor_sees_it_wait_and_an_operator_lists_it(client, queue, tokens):
    bid = arrived(client, queue, tokens)
    status = call(client, tokens["depositor"], "get", f"/api/v1/batches/{bid}").json()
    assert status["status"] == "Held" and status["awaiting_approval"] is True
    listed = call(client, tokens["operator"], "get", "/api/v1/approvals").json()["batches"]
    assert [(b["batch_id"], b["summary"]) for b in listed] == [(bid, {"objects": 1})]
    other = person("olaf", "operator")
    from steering.models import CollectionScope

    CollectionScope.objects.create(user=other, collections=["elsewhere"])
    scoped = ApiToken.issue(other, "t")[1]
    assert call(client, scoped, "get", "/api/v1/approvals").json() == {"batches": []}


def test_an_operator_decides_once_with_a_reason(client, queue, tokens):
    bid = arrived(client, queue, tokens)
    url = f"/api/v1/batches/{bid}/approval"
    refused = call(client, tokens["depositor"], "post", url, {"decision": "approve", "reason": "x"})
    assert refused.status_code == 403 and "needs the operator role" in refused.json()["errors"][0]
    bad = call(client, tokens["operator"], "post", url, {"decision": "maybe", "reason": "x"})
    assert bad.status_code == 400
    bare = call(client, tokens["operator"], "post", url, {"decision": "approve"})
    assert bare.status_code == 400 and "reason is required" in bare.json()["errors"][0]
    body = {"decision": "approve", "reason": "fine", "request_id": "r1"}
    done = call(client, tokens["operator"], "post", url, body)
    assert done.status_code == 200
    assert done.json()["result"] == "done" and done.json()["status"] == "Pending"
    again = call(client, tokens["operator"], "post", url, body)  # a retried request
    assert again.json()["admin_action"] == done.json()["admin_action"]
    assert AdminAction.objects.count() == 1
    late = call(client, tokens["operator"], "post", url, {"decision": "reject", "reason": "no"})
    assert late.status_code == 409 and late.json()["result"] == "skipped"
    assert queue.batches.get_batch(bid).status == "Pending"


def test_a_stale_version_decides_nothing(client, queue, tokens):
    bid = arrived(client, queue, tokens)
    body = {"decision": "reject", "reason": "no", "status_version": 7}
    stale = call(client, tokens["operator"], "post", f"/api/v1/batches/{bid}/approval", body)
    assert stale.status_code == 409 and "changed since" in stale.json()["detail"]
    assert queue.batches.get_batch(bid).awaiting_approval


def test_the_command_lists_and_decides(client, queue, tokens):
    bid = arrived(client, queue, tokens)
    out = io.StringIO()
    call_command("approve_batch", "--list", stdout=out)
    assert bid in out.getvalue() and "slow" in out.getvalue()
    with pytest.raises(CommandError, match="reason is required"):
        call_command("approve_batch", bid, "--user", "otto")
    with pytest.raises(CommandError, match="needs the operator role"):
        call_command("approve_batch", bid, "--user", "dora", "--reason", "x")
    out = io.StringIO()
    call_command("approve_batch", bid, "--user", "otto", "--reason", "spam", "--reject", stdout=out)
    assert f"{bid} rejected: now Deleted" in out.getvalue()
    batch = queue.batches.get_batch(bid)
    assert batch.status == "Deleted" and batch.message == "rejected by otto: spam"


def test_a_depositors_rerun_waits_for_approval_too(client, queue, tokens):
    bid = arrived(client, queue, tokens, "r-1")
    queue.approvals.approve(bid, "approved by otto: ok")
    queue.batch_moves.transition_batch(bid, "Processing", "x")
    queue.batch_moves.transition_batch(bid, "Failed", "no jobs were created")
    mirror.full_reconcile(queue)
    body = GOOD | {"batchID": "r-1", "rerun": True, "payload_url": "https://example.org/b.jpg"}
    again = call(client, tokens["depositor"], "post", "/api/v1/batches", body)
    assert again.status_code == 201 and again.json()["awaiting_approval"] is True
    new = again.json()["batch_id"]
    held = queue.batches.get_batch(new)
    assert (
        held.status == "Held"
        and held.awaiting_approval
        and queue.reads.exists(f"/batches/{new}/states")
    )
    assert held.approval["summary"] == {"objects": 1}
    mirror.apply_batch(held)
    url = f"/api/v1/batches/{new}/approval"
    done = call(client, tokens["operator"], "post", url, {"decision": "approve", "reason": "ok"})
    assert done.status_code == 200 and done.json()["status"] == "Pending"
    moved = queue.batches.get_batch(new)
    assert moved.status == "Pending" and not moved.awaiting_approval
    assert moved.submission["rerun_of"] == bid


def test_a_request_id_used_again_for_another_batch_or_decision_acts_anew(client, queue, tokens):
    b1 = arrived(client, queue, tokens, "x-1")
    b2 = arrived(client, queue, tokens, "x-2")
    body = {"decision": "approve", "reason": "ok", "request_id": "r1"}
    one = call(client, tokens["operator"], "post", f"/api/v1/batches/{b1}/approval", body)
    two = call(
        client,
        tokens["operator"],
        "post",
        f"/api/v1/batches/{b2}/approval",
        body | {"decision": "reject"},
    )
    assert two.status_code == 200 and two.json()["status"] == "Deleted"
    assert two.json()["admin_action"] != one.json()["admin_action"]
    assert queue.batches.get_batch(b2).status == "Deleted"


def test_a_depositor_lists_no_batch_to_act_on(client, queue, tokens):
    arrived(client, queue, tokens, "y-1")
    got = call(client, tokens["depositor"], "get", "/api/v1/approvals")
    assert got.status_code == 200 and got.json() == {"batches": []}


def test_a_linked_manifest_is_fetched_once_and_its_bytes_summarised(
    client, queue, tokens, monkeypatch
):
    from door import manifest_door
    from tests.door.test_submit_door import GOOD as MANIFEST

    fetched, read = [], []
    monkeypatch.setattr(manifest_door, "_linked", lambda url: fetched.append(url) or MANIFEST)
    monkeypatch.setattr(arrival, "summarise", lambda data, **kw: read.append(data) or {"x": 1})
    body = {"profile": "slow", "type": "object-manifest", "payload_url": "https://h.org/m.checkm"}
    answer = call(client, tokens["depositor"], "post", "/api/v1/batches", body)
    assert answer.status_code == 201 and answer.json()["awaiting_approval"] is True
    assert fetched == ["https://h.org/m.checkm"] and read == [MANIFEST]


def test_an_administrators_rerun_does_not_wait_the_person_re_running_decided(client, queue, tokens):
    from batches.models import Batch
    from steering.actions.catalog import ACTIONS
    from steering.actions.execution import execute

    bid = arrived(client, queue, tokens, "a-1")
    queue.approvals.approve(bid, "approved by otto: ok")
    queue.batch_moves.transition_batch(bid, "Processing", "x")
    queue.batch_moves.transition_batch(bid, "Reporting", "x")
    queue.batch_moves.transition_batch(bid, "Completed", "done")
    mirror.full_reconcile(queue)
    ada = person("ada", "administrator")
    version = Batch.objects.get(bid=bid).status_version
    record = execute(ada, ACTIONS["batch.rerun"], [(bid, version)], "asked", token="t-1")
    item = record.items.get()
    assert item.result == "done", item.detail
    new = item.detail.split("re-run as batch ", 1)[1].split()[0]
    assert queue.batches.get_batch(new).status == "Pending"
    assert queue.batches.get_batch(new).approval is None
