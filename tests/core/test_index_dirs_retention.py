"""The retention policy the dispatcher's periodic hook runs: finished items go by age, and
oldest first when an index directory nears the client's listing limit; nothing else goes."""

from __future__ import annotations

import time

import pytest

from harness.merrittzk import Item, MerrittZK
from merritt_queue.core import indexdirs, retention
from merritt_queue.core import tree as t
from tests.core.test_core_store import path_to

DAY = 86400.0


def job_in(store, bid: str, status: str) -> str:
    jid = store.new_jobs.create_job(bid, {"collection": "demo"})
    for step in path_to(status):
        store.moves.transition_job(jid, step, "on purpose" if step == "Failed" else "")
    return jid


def batch_of(store, *statuses: str, end: str = "Completed") -> tuple[str, list[str]]:
    """A batch acquired, its jobs moved to ``statuses``, reported and ended ``end``."""
    bid = store.new_batches.create_batch({"collection": "demo"}).id
    store.batch_locks.unlock_batch(store.batch_locks.acquire_pending_batch())
    jids = [job_in(store, bid, s) for s in statuses]
    if end:
        reporting = store.batch_locks.acquire_batch_for_reporting()
        assert reporting is not None and reporting.bid == bid
        store.batch_moves.transition_batch(reporting, end, release_lock=True)
    return bid, jids


def run(store, *, days: float | None = 30, limit: int = indexdirs.DEFAULT_MAXBUFFER, later=0.0):
    policy = retention.Policy(retention_seconds=None if days is None else days * DAY, limit=limit)
    keeper = retention.Retention(store, policy, now=lambda: time.time() + later)
    rows = []
    for _ in range(50):
        done = keeper.step()
        rows += done.rows
        if not done.more:
            break
    return keeper, rows


def test_by_age_only_finished_batches_and_deleted_jobs_go(store, zk):
    done, done_jobs = batch_of(store, "Completed", "Completed")
    with_failed, _ = batch_of(store, "Completed", "Failed")  # a librarian decides about it
    failed_batch, _ = batch_of(store, "Failed", end="Failed")
    running, running_jobs = batch_of(store, "Completed", "Processing", end="")
    held, deleted = job_in(store, running, "Held"), job_in(store, running, "Deleted")

    _, rows = run(store)  # all of it is new
    assert rows == []

    _, rows = run(store, later=31 * DAY)
    assert sorted(r.item_id for r in rows if r.result == "done") == sorted([done, deleted])
    assert all(r.why == "age" for r in rows)
    assert not zk.exists(t.batch_path(done))
    assert all(not zk.exists(t.job_path(j)) for j in done_jobs + [deleted])
    for kept in (with_failed, failed_batch, running):
        assert zk.exists(t.batch_path(kept))
    for kept in running_jobs + [held]:
        assert zk.exists(t.job_path(kept))


def test_no_age_rule_when_days_is_none(store):
    batch_of(store, "Completed")
    assert run(store, days=None, later=400 * DAY)[1] == []


def test_near_the_limit_the_oldest_finished_go_first_until_well_under_it(store, zk):
    batches = [batch_of(store, "Completed", "Completed")[0] for _ in range(4)]
    failed, _ = batch_of(store, "Failed", end="Failed")
    completed = t.job_state_dir("completed")
    # A limit at which 8 completed entries are some 90 % of a listing, none old.
    limit = indexdirs.estimate_bytes(8, indexdirs.INDEX_WIDTH) * 10 // 9
    keeper, rows = run(store, limit=limit)
    gone = [r.item_id for r in rows if r.result == "done"]
    # Oldest first, and only until the directory is under half the limit again.
    assert gone == batches[: len(gone)] and 0 < len(gone) < 4
    assert all(r.why == "pressure" for r in rows)
    sizes = {s.path: s for s in indexdirs.measure(zk, limit)}
    assert sizes[completed].ratio < retention.PRESSURE_FRACTION
    assert zk.exists(t.batch_path(failed))


def test_failed_jobs_piling_up_are_named_not_removed(store, zk):
    failed, jids = batch_of(store, "Failed", "Failed", "Failed", end="Failed")
    limit = indexdirs.estimate_bytes(3, indexdirs.INDEX_WIDTH) * 10 // 8
    keeper, rows = run(store, limit=limit, later=400 * DAY)
    assert rows == []
    assert all(zk.exists(t.job_path(j)) for j in jids)
    warnings = retention.warnings(indexdirs.measure(zk, limit))
    assert any("failed" in w and "librarian" in w for w in warnings)


def test_a_slice_is_bounded_and_the_next_tick_comes_soon(store, settings):
    for _ in range(3):
        batch_of(store, "Completed")
    policy = retention.Policy(retention_seconds=DAY, limit=indexdirs.DEFAULT_MAXBUFFER)
    keeper = retention.Retention(store, policy, now=lambda: time.time() + 2 * DAY)
    keeper.slice_items = 1
    first = keeper.step()
    assert len(first.rows) == 1 and first.more and first.wait <= 1.0
    rest = [keeper.step() for _ in range(5)]
    assert sum(len(s.rows) for s in rest) == 2 and not rest[-1].more
    assert rest[-1].wait > 60  # the next pass by age is not due for a while


def test_merrittzk_still_loads_what_remains(store, zk, make_client):
    old, _ = batch_of(store, "Completed")
    kept, kept_jobs = batch_of(store, "Completed", "Failed")
    run(store, later=31 * DAY)
    assert not zk.exists(t.batch_path(old))
    merritt = MerrittZK(make_client())
    assert merritt.load(Item("batch", kept)).status == "Completed"
    assert sorted(merritt.load(Item("job", j)).status for j in kept_jobs) == [
        "Completed",
        "Failed",
    ]
    # Merritt's own cleanup passes what is left without error.
    assert merritt.delete_completed_batches() == [kept]


@pytest.mark.parametrize("days", [0])
def test_zero_days_means_every_finished_item_is_old(store, zk, days):
    bid, _ = batch_of(store, "Completed")
    assert [r.item_id for r in run(store, days=days)[1]] == [bid]


def test_a_directory_kept_full_by_failed_jobs_is_not_rescanned_at_every_tick(store, zk):
    batch_of(store, "Failed", "Failed", "Failed", end="Failed")
    limit = indexdirs.estimate_bytes(3, indexdirs.INDEX_WIDTH) * 10 // 8
    policy = retention.Policy(retention_seconds=None, limit=limit)
    keeper = retention.Retention(store, policy)
    first = keeper.step()
    assert not first.more and first.wait == retention.PRESSURE_GAP
    listed = []
    real = store.batches.list_batch_ids
    store.batches.list_batch_ids = lambda: listed.append(1) or real()
    again = keeper.step()
    assert listed == [] and 0 < again.wait <= retention.PRESSURE_GAP
