"""Plain regression tests for bugs the property test (test_core_stateful.py) found in the core."""

from __future__ import annotations

import pytest

from merritt_queue.core import tree as t
from merritt_queue.core.errors import ChangedUnderYou
from merritt_queue.core.treecheck.consistency import check_tree


def test_a_priority_change_refuses_a_worker_still_holding_the_old_record(store, make_store, zk):
    """A worker's commit used to re-create the index entry at the old priority."""
    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {}, priority=5)
    worker = make_store()
    held = worker.job_locks.acquire_job("Pending")
    read_earlier = store.jobs.get_job(jid)
    store.job_data.set_priority(jid, 1)
    with pytest.raises(ChangedUnderYou):
        worker.moves.succeed_job(held)
    with pytest.raises(ChangedUnderYou):
        store.moves.transition_job(read_earlier, "Held")
    worker.job_locks.unlock_job(held)
    assert store.jobs.jobs_in_state("Pending") == [(1, jid)]
    assert check_tree(store) == []
    assert worker.job_locks.acquire_job("Pending").priority == 1


def test_a_handler_that_changes_its_jobs_priority_commits_with_the_record_it_got_back(
    store, make_store
):
    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {}, priority=5)
    worker = make_store()
    held = worker.job_locks.acquire_job("Pending")
    lowered = worker.job_data.set_priority(held, 6)
    assert lowered.status_version > held.status_version
    worker.moves.succeed_job(lowered)
    assert store.jobs.jobs_in_state("Estimating") == [(6, jid)]
    assert check_tree(store) == []


def test_unlocking_a_stale_record_leaves_another_workers_new_lock(store, make_store, zk):
    """The runner unlocks after a refused commit; it used to delete whoever's lock was there."""
    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {})
    first, second, third = make_store(), make_store(), make_store()
    stale = first.job_locks.acquire_job("Pending")
    store.moves.force_fail(jid, "stuck")
    store.edits.resume_job(jid)
    assert second.job_locks.acquire_job("Pending").jid == jid
    with pytest.raises(ChangedUnderYou):
        first.moves.succeed_job(stale)
    first.job_locks.unlock_job(stale)
    assert zk.exists(t.job_node(jid, "lock")).ephemeralOwner == second.session.session_id
    assert third.job_locks.acquire_job("Pending") is None


def test_a_lock_that_could_not_be_released_in_an_outage_is_released_on_reconnection(
    store, make_store, monkeypatch
):
    """Found by the ZooKeeper-outage fault test: the session outlived the outage, and the
    lock a failed step could not drop kept the job from every worker for good."""
    import time

    from kazoo.client import KazooState
    from kazoo.exceptions import ConnectionLoss

    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {})
    worker = make_store()
    held = worker.job_locks.acquire_job("Pending")
    lock = t.job_node(jid, "lock")

    def away(*_a, **_k):
        raise ConnectionLoss()

    with monkeypatch.context() as m:
        m.setattr(worker.client, "exists", away)
        worker.job_locks.unlock_job(held)  # no error: the step goes on failing cleanly
    assert store.client.exists(lock) is not None
    worker.session._on_state(KazooState.CONNECTED)  # what kazoo calls when the connection is back
    deadline = time.monotonic() + 10
    while store.client.exists(lock) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.client.exists(lock) is None
    assert make_store().job_locks.acquire_job("Pending").jid == jid


def test_an_orphaned_lock_is_taken_anew_by_its_own_session(store, make_store, monkeypatch):
    from kazoo.exceptions import ConnectionLoss

    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {})
    worker = make_store()
    held = worker.job_locks.acquire_job("Pending")
    with monkeypatch.context() as m:
        m.setattr(worker.client, "exists", lambda *a, **k: (_ for _ in ()).throw(ConnectionLoss()))
        worker.job_locks.unlock_job(held)
    again = worker.job_locks.lock_job(jid)
    assert again is not None and again.lock_session == worker.session.session_id
    assert worker.session.orphaned == set()
