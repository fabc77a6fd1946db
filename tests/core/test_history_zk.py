"""The ``history`` node the store writes beside each job's and batch's status (issue 14).

Each kind of status write appends exactly one entry in its own multi, with the status
version it made; reads carry the history; bounds hold; a refused write leaves it as it
was; a damaged node is read as empty and mended by the next write; purge removes it.
"""

from __future__ import annotations

import pytest

from harness.merrittzk import Item, MerrittZK
from merritt_queue.core import history as h
from merritt_queue.core import tree as t
from merritt_queue.core.errors import ChangedUnderYou
from merritt_queue.core.states import JOB_STEPS, BatchStatus
from merritt_queue.core.store import NewJob, QueueStore
from merritt_queue.core.treecheck.consistency import check_tree

ACTOR = "admin:ann"


@pytest.fixture
def store(zk) -> QueueStore:
    s = QueueStore(zk, actor=ACTOR)
    s.init()
    return s


@pytest.fixture
def batch(store: QueueStore) -> str:
    bid = store.new_batches.create_batch({"batchID": "uuid-h", "collection": "demo"}).id
    store.batch_locks.unlock_batch(store.batch_locks.acquire_pending_batch())
    return bid


def node(zk, path: str) -> h.History:
    """The history as stored, decoded on its own (not through the store)."""
    stat = zk.exists(path)
    return h.decode(zk.get(path)[0] if stat else None, stat is not None)


def job_history(zk, jid: str) -> h.History:
    return node(zk, t.job_node(jid, h.NODE))


def batch_history(zk, bid: str) -> h.History:
    return node(zk, t.batch_node(bid, h.NODE))


def status_version(zk, path: str) -> int:
    return zk.exists(path).version


def fields(entry: h.Entry) -> tuple:
    return (entry.version, entry.from_status, entry.to_status, entry.message, entry.retry_count)


# --- each kind of write appends one entry --------------------------------------------


def test_creating_a_job_writes_its_first_entry_in_the_same_multi(store, zk, batch):
    store.new_jobs.create_job(batch, {})  # the first makes the batch's batch-processing
    writes = store.stats["writes"]
    jid = store.new_jobs.create_job(batch, {})
    assert store.stats["writes"] - writes == 2  # the id, then one multi: no write of its own
    entries = job_history(zk, jid).entries
    assert [fields(e) for e in entries] == [(0, "", "Pending", "", 0)]
    status = t.decode_json(zk.get(t.job_node(jid, "status"))[0])
    assert entries[0].by == ACTOR and entries[0].at == status["last_modified"]
    assert store.jobs.get_job(jid).history == job_history(zk, jid)


def test_create_jobs_writes_each_jobs_first_entry(store, zk, batch):
    jids = store.new_jobs.create_jobs(batch, [NewJob({}), NewJob({}, priority=2)])
    for jid in jids:
        assert [fields(e) for e in job_history(zk, jid).entries] == [(0, "", "Pending", "", 0)]


def test_every_kind_of_job_write_appends_exactly_one_entry(store, zk, batch):
    jid = store.new_jobs.create_job(batch, {}, identifiers={"primary_id": "ark:/1/h"})
    job = store.moves.transition_job(jid, "Estimating", "estimating")
    job = store.moves.note_job(job, "waiting for disk space")
    job = store.job_data.set_priority(job, 3)
    job = store.moves.fail_job(job, "disk full")
    job = store.edits.resume_job(job, message="try again")
    job = store.moves.force_fail(job.jid, "stuck for 3 days")
    want = [
        (0, "", "Pending", "", 0),
        (1, "Pending", "Estimating", "estimating", 0),
        (2, "Estimating", "Estimating", "waiting for disk space", 0),
        (3, "Estimating", "Estimating", "priority 5 -> 3", 0),  # the priority change
        (4, "Estimating", "Failed", "disk full", 0),
        (5, "Failed", "Estimating", "try again", 1),
        (6, "Estimating", "Failed", "stuck for 3 days", 1),
    ]
    stored = job_history(zk, jid)
    assert [fields(e) for e in stored.entries] == want
    assert {e.by for e in stored.entries} == {ACTOR}
    assert stored.entries[-1].version == status_version(zk, t.job_node(jid, "status"))
    status = t.decode_json(zk.get(t.job_node(jid, "status"))[0])
    assert stored.entries[-1].at == status["last_modified"]
    # The record a write returns carries the history as written.
    assert job.history == stored and store.jobs.get_job(jid).history == stored


def test_each_writer_is_recorded_as_its_actor(store, zk, batch, make_store):
    jid = store.new_jobs.create_job(batch, {})
    worker = make_store()
    worker.changes.default_actor = h.process_actor(h.WORKER_PREFIX)
    worker.moves.transition_job(jid, "Estimating")
    store.changes.default_actor = h.admin_actor("bob")
    store.moves.fail_job(jid, "no")
    assert [e.by for e in job_history(zk, jid).entries] == [
        ACTOR,
        h.process_actor(h.WORKER_PREFIX),
        "admin:bob",
    ]
    assert h.process_actor(h.WORKER_PREFIX).startswith("worker ")


def test_a_chained_worker_reads_the_history_once_and_appends_one_entry_per_step(store, zk, batch):
    jid = store.new_jobs.create_job(batch, {})
    job = store.job_locks.acquire_job("Pending")
    job = store.moves.transition_job(job, "Estimating", keep_lock=True)
    for _ in range(3):
        rounds = store.stats["round_trips"]
        job = store.moves.succeed_job(job, "step done", keep_lock=True)
        assert store.stats["round_trips"] - rounds == 1  # the multi alone: no history read
    store.moves.succeed_job(job, release_lock=True)
    steps = ["Pending", "Estimating", "Provisioning", "Downloading", "Processing", "Storing"]
    got = [(e.version, e.from_status, e.to_status) for e in job_history(zk, jid).entries]
    assert got == [(i, steps[i - 1] if i else "", steps[i]) for i in range(len(steps))]


def test_a_bulk_move_of_partial_records_reads_their_histories_in_one_round(store, zk, batch):
    store.moves.fail_job(store.new_jobs.create_job(batch, {}), "")  # makes the batch's batch-failed
    jids = [store.new_jobs.create_job(batch, {}) for _ in range(5)]
    store.moves.transition_job(jids[0], "Estimating", "one at work first")
    heads = store.jobs.job_heads(jids)
    assert all(r.partial and r.history is None for r in heads.values())
    rounds = store.stats["round_trips"]
    moved = store.moves.move_jobs([(heads[j], "Failed", "bulk fail", False) for j in jids])
    assert store.stats["round_trips"] - rounds == 2  # the histories, then the multis
    assert all(not isinstance(r, Exception) for r in moved)
    for jid, record in zip(jids, moved, strict=True):
        stored = job_history(zk, jid)
        assert record.history == stored
        last = stored.entries[-1]
        before = "Estimating" if jid == jids[0] else "Pending"
        assert fields(last) == (len(stored.entries) - 1, before, "Failed", "bulk fail", 0)
        assert last.version == status_version(zk, t.job_node(jid, "status"))


def test_a_bulk_move_of_whole_records_reads_no_history(store, zk, batch):
    jids = [store.new_jobs.create_job(batch, {}) for _ in range(3)]
    jobs = [store.jobs.get_job(j) for j in jids]
    rounds = store.stats["round_trips"]
    store.moves.move_jobs([(job, "Held", "", False) for job in jobs])
    assert store.stats["round_trips"] - rounds == 1
    assert all(len(job_history(zk, j).entries) == 2 for j in jids)


def test_a_stale_records_write_is_refused_and_leaves_the_history_as_it_was(
    store, zk, batch, make_store
):
    jid = store.new_jobs.create_job(batch, {})
    stale = store.jobs.get_job(jid)
    make_store().moves.transition_job(jid, "Held", "held elsewhere")
    before = zk.get(t.job_node(jid, h.NODE))[0]
    with pytest.raises(ChangedUnderYou):
        store.moves.transition_job(stale, "Estimating")
    assert isinstance(store.moves.move_jobs([(stale, "Failed", "", False)])[0], ChangedUnderYou)
    with pytest.raises(ChangedUnderYou):
        store.job_data.set_priority(stale, 9)
    assert zk.get(t.job_node(jid, h.NODE))[0] == before
    assert [e.to_status for e in job_history(zk, jid).entries] == ["Pending", "Held"]


# --- bounds --------------------------------------------------------------------------


def test_the_history_keeps_the_newest_entries_and_counts_the_dropped(store, zk, batch):
    jid = store.new_jobs.create_job(batch, {})
    job = store.jobs.get_job(jid)
    for i in range(h.MAX_ENTRIES + 4):
        job = store.moves.note_job(job, f"note {i}")
    stored = job_history(zk, jid)
    assert len(stored.entries) == h.MAX_ENTRIES and stored.dropped == 5
    assert [e.version for e in stored.entries] == list(range(5, h.MAX_ENTRIES + 5))
    assert stored.entries[-1].message == f"note {h.MAX_ENTRIES + 3}"


def test_the_history_node_stays_under_its_byte_bound(store, zk, batch):
    jid = store.new_jobs.create_job(batch, {})
    job = store.jobs.get_job(jid)
    for i in range(80):
        job = store.moves.note_job(job, f"{i:03d} " + "x" * 2000)  # cut to MAX_MESSAGE in the node
    data, _ = zk.get(t.job_node(jid, h.NODE))
    stored = h.decode(data)
    assert len(data) <= h.MAX_BYTES
    assert stored.dropped > 0 and stored.dropped + len(stored.entries) == 81
    assert stored.entries[-1].version == 80 and stored.entries[-1].message.startswith("079 ")
    assert all(len(e.message) == h.MAX_MESSAGE for e in stored.entries)
    versions = [e.version for e in stored.entries]
    assert versions == list(range(versions[0], 81))


# --- batches -------------------------------------------------------------------------


def test_a_batchs_lifecycle_is_its_history(store, zk):
    bid = store.new_batches.create_batch({"collection": "demo"}).id
    store.batch_moves.hold_batch(bid, "librarian asked")
    store.batch_moves.release_batch(bid, "go on")
    acquired = store.batch_locks.acquire_pending_batch()
    jid = store.new_jobs.create_job(bid, {})
    store.batch_locks.unlock_batch(acquired)
    for step in [*JOB_STEPS, "Completed"]:
        store.moves.transition_job(jid, step)
    reporting = store.batch_locks.acquire_batch_for_reporting()
    done = store.batch_moves.transition_batch(reporting, "Completed", "all done", release_lock=True)
    stored = batch_history(zk, bid)
    assert [fields(e) for e in stored.entries] == [
        (0, "", "Pending", "", 0),
        (1, "Pending", "Held", "librarian asked", 0),
        (2, "Held", "Pending", "go on", 0),
        (3, "Pending", "Processing", "", 0),
        (4, "Processing", "Reporting", "", 0),
        (5, "Reporting", "Completed", "all done", 0),
    ]
    assert {e.by for e in stored.entries} == {ACTOR}
    assert done.history == stored and store.batches.get_batch(bid).history == stored
    assert stored.entries[-1].version == status_version(zk, t.batch_node(bid, "status"))


def test_a_batch_begun_and_started_by_a_worker(store, zk):
    bid = store.new_batches.create_batch({}).id
    begun = store.batch_locks.begin_batch(bid)
    started = store.batch_moves.start_processing(begun, "3 jobs")
    assert [(e.to_status, e.message) for e in started.history.entries] == [
        ("Pending", ""),
        ("Processing", "3 jobs"),
    ]
    assert started.history == batch_history(zk, bid)
    store.batch_moves.transition_batch(bid, BatchStatus.FAILED, "no")
    store.batch_moves.transition_batch(bid, BatchStatus.UPDATE_REPORTING)
    store.batch_moves.transition_batch(bid, BatchStatus.FAILED, "again")
    store.batch_moves.delete_batch(bid, "gone")
    got = [(e.from_status, e.to_status) for e in batch_history(zk, bid).entries]
    assert got[2:] == [
        ("Processing", "Failed"),
        ("Failed", "UpdateReporting"),
        ("UpdateReporting", "Failed"),
        ("Failed", "Deleted"),
    ]


def test_check_tree_repairs_a_batch_status_with_its_entry_by_the_repair(store, zk):
    bid = store.new_batches.create_batch({}).id
    # Processing, and no job ever made
    store.batch_locks.unlock_batch(store.batch_locks.acquire_pending_batch())
    store.changes.default_actor = ""
    findings = check_tree(store, repair=True, grace=0)
    assert [f.kind for f in findings if f.repaired] == ["processing-batch-without-jobs"]
    last = batch_history(zk, bid).entries[-1]
    assert (last.version, last.from_status, last.to_status, last.by) == (
        2,
        "Processing",
        "Failed",
        h.REPAIR,
    )
    assert last.version == status_version(zk, t.batch_node(bid, "status"))


# --- damage and removal ----------------------------------------------------------------


def test_a_damaged_history_reads_as_empty_is_reported_and_the_next_write_restores_it(
    store, zk, batch
):
    jid = store.new_jobs.create_job(batch, {})
    zk.set(t.job_node(jid, h.NODE), b"{not json")
    zk.set(t.batch_node(batch, h.NODE), b"\xff\xfe")
    job = store.jobs.get_job(jid)
    assert job.history.damaged and job.history.entries == () and job.history.exists
    assert store.batches.get_batch(batch).history.damaged
    findings = check_tree(store)
    # A job's history is not read by the check (its repairs never write a job's status).
    assert sorted((f.kind, f.path) for f in findings) == [
        ("damaged-history", t.batch_node(batch, h.NODE)),
    ]
    assert all(f.repair is None and "next status change" in f.reason for f in findings)
    store.moves.transition_job(job, "Held", "mended")
    stored = job_history(zk, jid)
    assert not stored.damaged and [fields(e) for e in stored.entries] == [
        (1, "Pending", "Held", "mended", 0)
    ]
    assert [f.kind for f in check_tree(store)] == ["damaged-history"]  # the batch's, still


def test_an_item_without_a_history_gets_one_at_its_next_write(store, zk, batch):
    jid = store.new_jobs.create_job(batch, {})
    zk.delete(t.job_node(jid, h.NODE))  # as an item from before histories, or Merritt's
    job = store.jobs.get_job(jid)
    assert job.history == h.ABSENT
    store.moves.transition_job(job, "Held")
    assert [fields(e) for e in job_history(zk, jid).entries] == [(1, "Pending", "Held", "", 0)]
    assert check_tree(store) == []


def test_purge_removes_the_history_of_jobs_and_batches(store, zk, batch):
    done = store.new_jobs.create_job(batch, {})
    for step in [*JOB_STEPS, "Completed"]:
        store.moves.transition_job(done, step)
    gone = store.new_jobs.create_job(batch, {})
    store.moves.transition_job(gone, "Held")
    store.moves.delete_job(gone)
    store.removal.purge_job(gone)
    assert not zk.exists(t.job_path(gone))
    reporting = store.batch_locks.acquire_batch_for_reporting()
    store.batch_moves.transition_batch(reporting, "Completed", release_lock=True)
    assert store.removal.purge_batch(batch) == [done]
    assert not zk.exists(t.batch_path(batch)) and not zk.exists(t.job_path(done))


def test_a_job_or_batch_left_as_a_history_alone_is_an_empty_shell_to_check_tree(store, zk):
    """MerrittZK's recursive delete, interrupted, may leave the history alone."""
    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {})
    for child in zk.get_children(t.job_path(jid)):
        if child != h.NODE:
            zk.delete(t.job_node(jid, child))
    for child in zk.get_children(t.batch_path(bid)):
        if child != h.NODE:
            zk.delete(t.batch_node(bid, child), recursive=True)
    findings = check_tree(store, repair=True, grace=0)
    shells = {f.kind: f for f in findings if f.kind.startswith("half-created")}
    assert shells["half-created-job"].repaired and shells["half-created-batch"].repaired
    assert not zk.exists(t.job_path(jid)) and not zk.exists(t.batch_path(bid))


# --- beside Merritt's ingest (harness/merrittzk.py) -------------------------------------


@pytest.fixture
def merritt(make_client) -> MerrittZK:
    return MerrittZK(make_client())


def test_a_move_merritt_makes_between_ours_leaves_a_gap_and_keeps_our_entries(
    store, zk, batch, merritt
):
    jid = store.new_jobs.create_job(batch, {"profile": "demo"})
    store.moves.transition_job(jid, "Estimating", "ours")
    taken = merritt.acquire_job("Estimating")
    assert taken is not None and taken.id == jid
    merritt.set_status(taken, "Provisioning")  # rewrites the status node alone
    merritt.unlock(taken)
    job = store.jobs.get_job(jid)
    assert job.status_version == 2 and [e.version for e in job.history.entries] == [0, 1]
    store.moves.transition_job(job, "Downloading", "ours again")
    stored = job_history(zk, jid)
    assert [fields(e) for e in stored.entries] == [
        (0, "", "Pending", "", 0),
        (1, "Pending", "Estimating", "ours", 0),
        (3, "Provisioning", "Downloading", "ours again", 0),  # version 2 was Merritt's
    ]
    assert stored.get(2) is None
    assert stored.entries[-1].version == status_version(zk, t.job_node(jid, "status"))
    assert merritt.load(Item("job", jid)).status == "Downloading"  # it still reads the job


def test_an_item_merritt_created_gets_its_history_at_our_first_write(store, zk, merritt):
    created = merritt.create_batch({"profile": "demo", "update": False})
    assert not zk.exists(t.batch_node(created.id, h.NODE))
    store.batch_moves.hold_batch(created.id, "held here")
    assert [fields(e) for e in batch_history(zk, created.id).entries] == [
        (1, "Pending", "Held", "held here", 0)
    ]


def test_merritts_delete_of_our_batch_and_job_removes_their_history(store, zk, merritt):
    bid = store.new_batches.create_batch({"profile": "demo"}).id
    store.batch_locks.unlock_batch(store.batch_locks.acquire_pending_batch())
    done = store.new_jobs.create_job(bid, {"profile": "demo"})
    for step in [*JOB_STEPS, "Completed"]:
        store.moves.transition_job(done, step)
    reporting = store.batch_locks.acquire_batch_for_reporting()
    store.batch_moves.transition_batch(reporting, "Completed", release_lock=True)
    assert zk.exists(t.batch_node(bid, h.NODE)) and zk.exists(t.job_node(done, h.NODE))
    assert merritt.delete_completed_batches() == [bid]
    assert not zk.exists(t.batch_path(bid)) and not zk.exists(t.job_path(done))

    other = store.new_batches.create_batch({"profile": "demo"}).id
    jid = store.new_jobs.create_job(other, {"profile": "demo"})
    store.moves.transition_job(jid, "Held")
    store.moves.delete_job(jid, "not wanted")
    merritt.delete_job(merritt.load(Item("job", jid)))
    assert not zk.exists(t.job_path(jid))


# --- readers and actors ---------------------------------------------------------------


def test_the_snapshot_reads_the_history_as_the_store_does(store, zk, batch):
    from merritt_queue.core import snapshot

    jid = store.new_jobs.create_job(batch, {})
    store.moves.transition_job(jid, "Held", "wait")
    job = snapshot.read_jobs(zk, [jid]).records[jid]
    assert job.history == store.jobs.get_job(jid).history and len(job.history.entries) == 2
    got = snapshot.read_batches(zk, [batch]).records[batch]
    assert got.history == store.batches.get_batch(batch).history and got.history.exists


def test_the_dispatchers_store_is_spelled_as_the_dispatcher_unless_it_has_an_actor(
    make_store, redis
):
    from merritt_queue.core.dispatcher import Dispatcher
    from merritt_queue.project.tasks import TASKS

    own = make_store()
    Dispatcher(own, redis, TASKS)
    assert own.changes.actor == h.process_actor(h.DISPATCHER_PREFIX)
    shared = make_store()
    shared.changes.default_actor = "admin:ann"
    Dispatcher(shared, redis, TASKS)
    assert shared.changes.actor == "admin:ann"
