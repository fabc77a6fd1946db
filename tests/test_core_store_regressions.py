"""Plain regression tests for bugs the property test (test_core_stateful.py) found in the core."""

from __future__ import annotations

import pytest

from merritt_queue import tree as t
from merritt_queue.errors import ChangedUnderYou


def test_unlocking_a_stale_record_leaves_another_workers_new_lock(store, make_store, zk):
    """The runner unlocks after a refused commit; it used to delete whoever's lock was there."""
    bid = store.create_batch({}).id
    jid = store.create_job(bid, {})
    first, second, third = make_store(), make_store(), make_store()
    stale = first.acquire_job("Pending")
    store.force_fail(jid, "stuck")
    store.resume_job(jid)
    assert second.acquire_job("Pending").jid == jid
    with pytest.raises(ChangedUnderYou):
        first.succeed_job(stale)
    first.unlock_job(stale)
    assert zk.exists(t.job_node(jid, "lock")).ephemeralOwner == second.session_id
    assert third.acquire_job("Pending") is None
