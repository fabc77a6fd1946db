"""The access queue's core against a replay of MerrittZK's Access calls (tests/merrittzk_access.py):
what Merritt's access service and admin tool write, we read; what we write, they load."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from merritt_queue.core import access
from merritt_queue.core.errors import ChangedUnderYou, InvalidTransition, NotFound
from tests.merrittzk_access import MerrittAccess

TOKEN = {
    "status": 201,
    "token": "bf6ef133-9b05-4fd8-a4d1-845c40125315",
    "cloud-content-byte": 206290233,
    "delivery-node": 7001,
    "anticipated-availability-time": "2026-11-28T10:00:00-08:00",
}
LATER = datetime.now(UTC) + timedelta(days=30)


@pytest.fixture
def merritt(store, make_client) -> MerrittAccess:
    m = MerrittAccess(make_client())
    m.init_nodes()
    return m


def _failed(merritt: MerrittAccess, queue: str = "small") -> str:
    qid = merritt.create_assembly(queue, TOKEN)
    assert merritt.acquire_pending_assembly(queue) == qid
    merritt.set_status(queue, qid, "Processing")
    merritt.set_status(queue, qid, "Failed", "storage said 500")
    merritt.unlock(queue, qid)
    return qid


def test_a_request_merritt_makes_reads_whole(zk, merritt):
    qid = merritt.create_assembly("large", TOKEN)
    assert qid == "qid0000000000"
    [item] = access.read_queues(zk)
    assert (item.queue, item.qid, item.status, item.status_version) == ("large", qid, "Pending", 0)
    assert item.token_id == TOKEN["token"] and item.token_status == "201"
    assert item.size == 206290233 and item.delivery_node == 7001
    assert item.anticipated_availability == TOKEN["anticipated-availability-time"]
    assert item.url == "" and item.ark == "" and not item.locked and not item.problems
    assert item.created is not None and item.last_modified
    assert merritt.acquire_pending_assembly("large") == qid
    locked = access.read_item(zk, "large", qid)
    assert locked.locked and locked.lock_owner == merritt.zk.client_id[0]


def test_requeue_is_the_admin_tools_and_merritt_takes_it_again(zk, merritt):
    qid = _failed(merritt)
    done = access.requeue(
        zk, "small", qid, actor="admin:ops", reason="storage is back", expected_version=2
    )
    assert done.changed and done.item.status == "Pending" and done.item.status_version == 3
    status, token = merritt.load("small", qid)
    assert (status, token) == ("Pending", TOKEN)
    raw = json.loads(zk.get(access.item_path("small", qid) + "/status")[0])
    assert raw["message"] == "" and raw["last_modified"]
    [entry] = access.read_item(zk, "small", qid).history.entries
    assert (entry.version, entry.from_status, entry.to_status) == (3, "Failed", "Pending")
    assert (entry.by, entry.message) == ("admin:ops", "storage is back")
    assert merritt.acquire_pending_assembly("small") == qid
    merritt.set_status("small", qid, "Processing")
    merritt.set_status("small", qid, "Completed")
    assert [j["id"] for j in merritt.list_jobs_as_json()] == [qid]


def test_a_second_click_does_nothing_and_a_stale_page_is_refused(zk, merritt):
    qid = _failed(merritt)
    assert access.requeue(zk, "small", qid, actor="admin:a").changed
    again = access.requeue(zk, "small", qid, actor="admin:a")
    assert not again.changed and again.item.status_version == 3
    with pytest.raises(ChangedUnderYou):
        access.delete(zk, "small", qid, actor="admin:a", expected_version=2)
    with pytest.raises(InvalidTransition, match="is Pending; only a Completed or Failed"):
        access.delete(zk, "small", qid, actor="admin:a")
    with pytest.raises(NotFound):
        access.requeue(zk, "small", "qid0000000099", actor="admin:a")


def test_requeue_only_a_failed_request(zk, merritt):
    qid = merritt.create_assembly("small", TOKEN)
    merritt.acquire_pending_assembly("small")
    merritt.set_status("small", qid, "Processing")
    with pytest.raises(InvalidTransition, match="is Processing; only a Failed"):
        access.requeue(zk, "small", qid, actor="admin:a")
    dry = access.requeue(zk, "small", _failed(merritt), actor="admin:a", dry_run=True)
    assert not dry.changed and dry.item.status == "Failed"


def test_delete_and_merritts_own_delete_and_cleanup_remove_ours(zk, merritt):
    failed = _failed(merritt)
    done = merritt.create_assembly("small", TOKEN)
    merritt.acquire_pending_assembly("small")
    merritt.set_status("small", done, "Processing")
    merritt.set_status("small", done, "Completed")
    for qid in (failed, done):
        assert access.delete(zk, "small", qid, actor="admin:a", reason="asked").changed
        assert merritt.load("small", qid)[0] == "Deleted"
    merritt.delete("small", failed)  # recursive: our history node goes with it
    assert merritt.admin_cleanup() == [f"small/{done}"]
    assert access.read_queues(zk) == []


def test_remove_finished_by_age_leaves_the_rest(zk, merritt):
    failed = _failed(merritt)
    completed = merritt.create_assembly("large", TOKEN)
    merritt.acquire_pending_assembly("large")
    merritt.set_status("large", completed, "Processing")
    merritt.set_status("large", completed, "Completed")
    merritt.unlock("large", completed)
    deleted = _failed(merritt)
    merritt.admin_delete("small", deleted)
    pending = merritt.create_assembly("small", TOKEN)
    young = access.remove_finished(zk, timedelta(days=1))
    assert young.removed == [] and "changed less than" in young.skipped[f"large/{completed}"]
    dry = access.remove_finished(zk, timedelta(days=1), now=LATER, dry_run=True)
    assert sorted(dry.selected) == sorted([f"large/{completed}", f"small/{deleted}"])
    assert dry.removed == [] and len(access.read_queues(zk)) == 4
    stale = access.remove_finished(
        zk, timedelta(days=1), now=LATER, expected={f"small/{deleted}": 2}
    )
    assert "changed since it was shown" in stale.skipped[f"small/{deleted}"]
    assert stale.removed == [f"large/{completed}"]
    assert stale.items[f"small/{deleted}"].status == "Deleted"
    done = access.remove_finished(zk, timedelta(days=1), now=LATER)
    assert done.removed == [f"small/{deleted}"]
    assert "is Pending" in done.skipped[f"small/{pending}"]
    assert "is Failed" in done.skipped[f"small/{failed}"]
    assert merritt.list_jobs("small") == [failed, pending] and merritt.list_jobs("large") == []


def test_a_locked_finished_request_is_not_removed(zk, merritt):
    qid = merritt.create_assembly("small", TOKEN)
    merritt.acquire_pending_assembly("small")
    merritt.set_status("small", qid, "Processing")
    merritt.set_status("small", qid, "Completed")
    out = access.remove_finished(zk, timedelta(0), now=LATER)
    assert out.removed == [] and out.skipped == {f"small/{qid}": "is locked"}
    merritt.unlock("small", qid)
    # No age asked: removed at once, even with the web host's clock behind ZooKeeper's.
    past = datetime.now(UTC) - timedelta(hours=1)
    assert access.remove_finished(zk, timedelta(0), now=past).removed == [f"small/{qid}"]


def test_pause_locks_are_merritts(zk, merritt):
    assert access.paused(zk) == {"small": False, "large": False}
    assert access.pause(zk, "large") and not access.pause(zk, "large")
    assert merritt.paused("large") and not merritt.paused("small")
    assert zk.get("/locks/queue/accessLarge")[0] == b""
    merritt.pause("small")
    assert access.paused(zk) == {"small": True, "large": True}
    assert access.unpause(zk, "small") and not access.unpause(zk, "small")
    assert not merritt.paused("small")


def test_what_merritt_cannot_load_is_a_problem(zk, merritt):
    qid = merritt.create_assembly("small", TOKEN)
    zk.set(access.item_path("small", qid) + "/status", b'{"status":"Consumed"}')
    zk.set(access.item_path("small", qid) + "/token", b"not json")
    zk.create("/access/small/qid0000000005")
    items = {i.qid: i for i in access.read_queues(zk)}
    assert items[qid].status is None
    assert items[qid].problems == ("status 'Consumed' is not an access state", "token is not JSON")
    assert items["qid0000000005"].problems == ("no status node", "no token node")
    zk.create("/access/small/states")
    assert access.unknown_entries(zk) == {"/access/small": ["states"]}
    with pytest.raises(InvalidTransition, match="is unreadable"):
        access.requeue(zk, "small", qid, actor="admin:a")


def _completed(merritt: MerrittAccess, queue: str = "small") -> str:
    qid = merritt.create_assembly(queue, TOKEN)
    merritt.acquire_pending_assembly(queue)
    merritt.set_status(queue, qid, "Processing")
    merritt.set_status(queue, qid, "Completed")
    merritt.unlock(queue, qid)
    return qid


def test_the_replay_loads_as_merritt_does_and_our_cleanup_passes_what_it_cannot_load(zk, merritt):
    """Java's ``new JSONObject`` takes an object only; the Ruby gem's load needs the token
    node, and its listing skips what it cannot load and goes on (so the admin tool's
    cleanup removes the rest). Ours removes every finished one, and says why it left one."""
    from tests.merrittzk_access import NodeInvalid

    array, no_token, odd, done = (_completed(merritt) for _ in range(4))
    zk.set(access.item_path("small", array) + "/token", b"[1]")
    with pytest.raises(NodeInvalid):
        merritt.load("small", array)
    with pytest.raises(NodeInvalid):  # Java's service stops at it, as Merritt's does
        merritt.acquire_pending_assembly("small")
    zk.delete(access.item_path("small", no_token) + "/token")
    assert merritt.load("small", no_token)[0] == "Completed"  # Java: the token is optional
    with pytest.raises(NodeInvalid):
        merritt.ruby_load("small", no_token)
    with pytest.raises(NodeInvalid):
        merritt.admin_requeue("small", no_token)
    zk.set(access.item_path("small", odd) + "/status", b'{"status":"Consumed"}')
    listed = [j["id"] for j in merritt.list_jobs_as_json()]
    assert listed == [done]  # Ruby parses [1], then fails to add the listing's keys to it
    ours = access.remove_finished(zk, timedelta(0), now=LATER)
    # Finished by their status, they go, which lets Merritt's service past the bad token;
    # a status that is no AccessState is left, and said.
    assert sorted(ours.removed) == [f"small/{q}" for q in sorted((array, no_token, done))]
    assert ours.skipped == {f"small/{odd}": "is unreadable, not Completed or Deleted"}
    assert merritt.admin_cleanup() == []
    done = _completed(merritt, "large")  # Merritt's service stops at "Consumed" in small
    assert merritt.admin_cleanup() == [f"large/{done}"]
