"""Approval before a batch starts (issue 36, part 1): the tree an awaiting batch is, and the
decisions on it, beside Merritt's own ingest (``harness/merrittzk.py``, a replay of MerrittZK's
``Batch``: ``acquirePendingBatch``, ``acquireBatchForReporting``, ``deleteCompletedBatches``).
"""

from __future__ import annotations

import pytest

from harness.merrittzk import Item, MerrittZK
from merritt_queue.core import approval as ap
from merritt_queue.core import tree as t
from merritt_queue.core.errors import ChangedUnderYou, InvalidTransition
from merritt_queue.core.sides import CREATED_BY, CREATED_BY_KEY
from merritt_queue.core.states import BatchStatus as B
from merritt_queue.core.treecheck.consistency import check_tree

SUBMISSION = {
    "type": "file",
    "profile": "demo",
    "collection": "demo",
    "submitter": "dora",
    "payload_url": "http://example.org/a.txt",
    "batchID": "approve-me",
    CREATED_BY_KEY: CREATED_BY,
}


@pytest.fixture
def merritt(make_client) -> MerrittZK:
    return MerrittZK(make_client())


def awaiting(store, **extra) -> str:
    node = ap.node("demo", {"objects": 3})
    return store.new_batches.create_batch(SUBMISSION | extra, reserved=True, approval=node).id


def test_an_awaiting_batch_is_held_and_marked_in_its_creating_multi(store, zk):
    bid = awaiting(store)
    batch = store.batches.get_batch(bid)
    assert batch.status == B.HELD and batch.awaiting_approval
    assert batch.message.startswith("awaiting approval")
    assert batch.approval["summary"] == {"objects": 3}
    assert batch.approval["profile"] == "demo"
    assert zk.exists(t.batch_states(bid)) is not None
    assert [e.to_status for e in batch.history.entries] == [B.HELD]


def test_merritt_loads_it_and_leaves_it_alone(store, merritt):
    bid = awaiting(store)
    assert merritt.acquire_pending_batch() is None  # it has ``states``
    assert merritt.acquire_batch_for_reporting() is None  # no ``batch-processing``
    assert merritt.delete_completed_batches() == []
    assert merritt.load(Item("batch", bid)).status == B.HELD  # a BatchState it parses
    assert store.batches.get_batch(bid).awaiting_approval


def test_approve_moves_it_on_as_an_unapproved_batch_starts(store, zk):
    bid = awaiting(store)
    shown = store.batches.get_batch(bid)
    moved = store.approvals.approve(shown, "approved by olga: fine")
    assert moved.status == B.PENDING and moved.approval is None
    again = store.batches.get_batch(bid)
    assert again.status == B.PENDING and not again.awaiting_approval
    assert zk.exists(ap.path(bid)) is None
    assert bid in store.batches.pending_batches()
    assert ap.is_decision(B.HELD, B.PENDING, again.message)
    with pytest.raises(ChangedUnderYou):  # a second operator, from the same page
        store.approvals.reject(shown, "rejected by pat: no")
    with pytest.raises(InvalidTransition, match="awaits no approval"):
        store.approvals.approve(bid, "approved by olga: twice")


def test_reject_deletes_it_and_merritt_cleanup_removes_it(store, zk, merritt):
    bid = awaiting(store)
    moved = store.approvals.reject(bid, "rejected by olga: wrong collection")
    assert moved.status == B.DELETED
    assert zk.exists(ap.path(bid)) is None
    assert ap.is_decision(B.HELD, B.DELETED, moved.message)
    assert merritt.acquire_batch_for_reporting() is None  # the tombstone: passed by
    assert merritt.delete_completed_batches() == [bid]
    assert zk.exists(t.batch_path(bid)) is None
    assert zk.exists(t.batch_uuid_path("approve-me")) is None


def test_merritt_cleanup_removes_the_marker_with_a_batch(store, zk, merritt):
    """MerrittZK deletes a batch recursively (``deleteAll``): the node goes with it."""
    bid = awaiting(store)
    zk.set(t.batch_node(bid, "status"), t.encode_json(t.batch_status_record(B.DELETED)))
    zk.ensure_path(t.batch_job_dir(bid, "batch-processing"))
    assert merritt.delete_completed_batches() == [bid]
    assert zk.exists(t.batch_path(bid)) is None


def test_no_release_delete_or_release_all_goes_round_the_decision(store):
    bid = awaiting(store)
    with pytest.raises(InvalidTransition, match="awaits approval"):
        store.batch_moves.release_batch(bid, "released by pat: hurry")
    with pytest.raises(InvalidTransition, match="awaits approval"):
        store.batch_moves.delete_batch(bid, "deleted by pat")
    assert store.held.held_items("demo") == []
    assert [b.bid for b in store.approvals.awaiting()] == [bid]


def test_a_collection_hold_still_applies_after_approval(store):
    bid = awaiting(store)
    store.holds.hold_collection("demo", by="pat", reason="audit")
    store.approvals.approve(bid, "approved by olga: fine")
    held, _ = store.held.follow_collection_holds()
    assert held == [bid]
    assert store.batches.get_batch(bid).status == B.HELD
    assert not store.batches.get_batch(bid).awaiting_approval


def test_the_tree_check_finds_nothing_wrong_with_an_awaiting_batch_or_a_decided_one(store):
    waiting = awaiting(store)
    approved = awaiting(store, batchID="approve-2")
    rejected = awaiting(store, batchID="approve-3")
    store.approvals.approve(approved, "approved by olga: fine")
    store.approvals.reject(rejected, "rejected by olga: no")
    found = [
        f for f in check_tree(store) if any(b in f.path for b in (waiting, approved, rejected))
    ]
    assert found == []


def test_an_awaiting_batch_waits_for_a_decision_not_a_release():
    from merritt_queue.core import waiting
    from merritt_queue.core.approval import AWAITING_MESSAGE

    message = AWAITING_MESSAGE.format(profile="demo")
    item = waiting.Item("batch", "bid0000000008", "Held", collection="demo", message=message)
    found = waiting.decide(item, waiting.QueueFacts())
    assert found is not None and found.ends == "when an operator approves or rejects it"


def test_a_re_run_batch_awaits_as_a_first_run_and_merritt_leaves_it_alone(store, zk, merritt):
    first = store.new_batches.create_batch(SUBMISSION, reserved=True).id
    node = ap.node("demo", {"objects": 1})
    bid = store.new_batches.create_rerun_batch(
        "approve-me", SUBMISSION | {"rerun_of": first}, approval=node
    ).id
    batch = store.batches.get_batch(bid)
    assert batch.uuid == "approve-me~rerun-1" and batch.awaiting_approval
    assert zk.exists(t.batch_states(bid)) is not None
    assert merritt.acquire_pending_batch() is None
    assert merritt.load(Item("batch", bid)).status == B.HELD
    store.approvals.approve(bid, "approved by otto: ok")
    assert store.batches.get_batch(bid).status == B.PENDING
    assert merritt.acquire_pending_batch() is None  # ours still: it has ``states``
