"""check_tree over Merritt's access queues: what would stop Merritt's access service is
reported, and repaired only by setting a request Failed, which MerrittZK then loads."""

from __future__ import annotations

import time

import pytest

from merritt_queue.core import access
from merritt_queue.core.treecheck.consistency import check_tree
from tests.merrittzk_access import MerrittAccess, NodeInvalid

TOKEN = {"status": 201, "token": "t-1", "cloud-content-byte": 10, "delivery-node": 7777}


@pytest.fixture
def merritt(store, make_client) -> MerrittAccess:
    m = MerrittAccess(make_client())
    m.init_nodes()
    return m


def _access(findings):
    return [(f.kind, f.path, f.repaired) for f in findings if "/access/" in f.path]


def test_a_healthy_queue_has_no_findings(store, merritt):
    merritt.create_assembly("small", TOKEN)
    merritt.acquire_pending_assembly("small")
    assert _access(check_tree(store, grace=0)) == []


def test_an_unreadable_status_is_set_failed_and_merritt_takes_the_next(store, zk, merritt):
    bad = merritt.create_assembly("small", TOKEN)
    good = merritt.create_assembly("small", TOKEN)
    zk.set(access.item_path("small", bad) + "/status", b"{oops")
    with pytest.raises(NodeInvalid):
        merritt.acquire_pending_assembly("small")  # one bad request stops the queue
    status = access.item_path("small", bad) + "/status"
    young = check_tree(store, repair=True, grace=3600)
    assert _access(young) == [("access-status-unreadable", status, False)]
    assert any("only reported" in f.reason for f in young)
    found = check_tree(store, repair=True, grace=0)
    assert _access(found) == [("access-status-unreadable", status, True)]
    assert merritt.load("small", bad)[0] == "Failed"
    assert merritt.acquire_pending_assembly("small") == good
    [entry] = access.read_item(zk, "small", bad).history.entries
    assert (entry.from_status, entry.to_status, entry.by) == ("", "Failed", "check_tree --repair")


def test_a_request_without_status_gets_one(store, zk, merritt):
    zk.create("/access/large/qid0000000000", b"")
    zk.create("/access/large/qid0000000000/token", b'{"token":"x"}')
    found = check_tree(store, repair=True, grace=0)
    assert _access(found) == [
        ("access-status-unreadable", "/access/large/qid0000000000/status", True)
    ]
    assert merritt.load("large", "qid0000000000") == ("Failed", {"token": "x"})


def test_processing_whose_worker_is_gone_is_set_failed(store, make_client, merritt):
    worker = MerrittAccess(make_client())
    qid = worker.create_assembly("small", TOKEN)
    worker.acquire_pending_assembly("small")
    worker.set_status("small", qid, "Processing")
    worker.zk.stop()  # its session ends: the ephemeral lock goes
    worker.zk.close()
    time.sleep(0.2)
    path = access.item_path("small", qid) + "/status"
    recent = check_tree(store, repair=True, grace=0)
    assert _access(recent) == [("access-processing-unlocked", path, False)]
    assert merritt.load("small", qid)[0] == "Processing"
    found = check_tree(store, repair=True, grace=0, now=time.time() + 7200)
    assert _access(found) == [("access-processing-unlocked", path, True)]
    assert merritt.load("small", qid)[0] == "Failed"
    access.requeue(store.client, "small", qid, actor="admin:ops")
    assert merritt.acquire_pending_assembly("small") == qid


def test_what_is_not_ours_to_fix_is_only_reported(store, zk, merritt):
    qid = merritt.create_assembly("small", TOKEN)
    zk.set(access.item_path("small", qid) + "/token", b"[1]")
    zk.create("/access/small/states")
    zk.create(access.item_path("small", qid) + "/extra")
    merritt.lock("small", qid)
    found = check_tree(store, repair=True, grace=0, lock_max_age=0, now=time.time() + 5)
    base = access.item_path("small", qid)
    assert sorted(_access(found)) == [
        ("access-token-unreadable", f"{base}/token", False),
        ("access-unknown-child", f"{base}/extra", False),
        ("access-unknown-entry", "/access/small/states", False),
        ("stale-lock", f"{base}/lock", False),
    ]
