"""The mirror's timeline rows are the item's status versions in ZooKeeper, whatever the timing.

``make demo`` once showed 7 of 12 jobs with steps that never happened: the watch read a
job at version 3, then 5, and wrote "v5: Estimating -> Downloading"; the worker's delayed
write-through then kept that row, as the first one written. Here the live follower runs
beside a write-through held back (``store.changes.deferred``, as ``MQ_MIRROR_DELAY`` does), a
full reconcile, a worker that dies mid-chain and Merritt's ingest writing between our
writes; after each, a job's rows (by status version) equal its history node's entries
plus Merritt's writes, field by field.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from batches.models import BatchEvent
from harness.merrittzk import MerrittIngest, MerrittZK
from jobs.models import Job, JobEvent
from merritt_queue.core import history
from merritt_queue.core import tree as t
from merritt_queue.core.history import OTHER_WRITER, Entry, History
from merritt_queue.core.records import BatchRecord, JobRecord
from mirror import events, timeline
from mirror import facade as mirror
from tests.mirrorlive import SUBMISSION, make_jobs, wait_for

pytest_plugins = ["tests.mirrorlive"]

WORKER = "worker test-host:1"


def job(version: int, status: str, hist: History | None = None, **fields) -> JobRecord:
    values = dict(
        jid="jid0000000001",
        bid="bid0000000001",
        priority=5,
        space_needed=0,
        configuration={},
        status=status,
        last_successful_status=None,
        last_modified="2026-11-24 10:00:00 +0000",
        retry_count=0,
        message="",
        status_version=version,
        history=hist,
    )
    return JobRecord(**(values | fields))


def entry(version: int, old: str, new: str, **fields) -> Entry:
    at = f"2026-11-24 10:00:{version:02d} +0000"
    return Entry(version, old, new, fields.pop("at", at), by=fields.pop("by", WORKER), **fields)


def hist(*entries: Entry, dropped: int = 0) -> History:
    return History(tuple(entries), exists=True, dropped=dropped)


def brief(rows) -> list[tuple]:
    return [(r.version, r.from_status, r.to_status, r.actor, r.exact) for r in rows]


# --- timeline: pure ------------------------------------------------------------------


def test_entries_after_the_last_known_version_are_the_rows_exactly():
    h = hist(
        entry(0, "", "Pending"),
        entry(1, "Pending", "Estimating", message="sized", retry_count=1),
        entry(2, "Estimating", "Provisioning"),
    )
    rows = timeline.rows(job(2, "Provisioning", h), (0, "Pending"), "watch")
    assert brief(rows) == [
        (1, "Pending", "Estimating", WORKER, True),
        (2, "Estimating", "Provisioning", WORKER, True),
    ]
    assert (rows[0].message, rows[0].retry_count, rows[0].at) == (
        "sized",
        1,
        "2026-11-24 10:00:01 +0000",
    )
    assert timeline.rows(job(2, "Provisioning", h), (2, "Provisioning"), "watch") == []
    assert timeline.rows(job(1, "Estimating", h), (2, "Provisioning"), "watch") == []


def test_a_version_without_an_entry_is_merritt_s_and_exact_when_the_state_before_is_known():
    h = hist(entry(0, "", "Pending"), entry(1, "Pending", "Estimating"))
    record = job(2, "Provisioning", h, message="by Merritt")
    assert brief(timeline.rows(record, (1, "Estimating"), "watch")) == [
        (2, "Estimating", "Provisioning", OTHER_WRITER, True)
    ]
    # The state before comes from the entry just below, even when the mirror knew less.
    assert brief(timeline.rows(record, (0, "Pending"), "watch")) == [
        (1, "Pending", "Estimating", WORKER, True),
        (2, "Estimating", "Provisioning", OTHER_WRITER, True),
    ]
    # Created by Merritt and never written here: no history node at all.
    assert brief(timeline.rows(job(0, "Pending", history.ABSENT), None, "watch")) == [
        (0, "", "Pending", OTHER_WRITER, True)
    ]


def test_a_jump_is_recorded_as_what_is_known_never_as_invented_steps():
    record = job(6, "Recording", history.ABSENT, message="stored")
    (row,) = timeline.rows(record, (3, "Downloading"), "watch")
    assert (row.version, row.from_status, row.to_status, row.actor, row.exact) == (
        6,
        "",
        "Recording",
        OTHER_WRITER,
        False,
    )
    assert row.message == "3 changes not observed; now Recording: stored"
    # Between entries, versions with none (Merritt's) get no row: the next entry's
    # from_status is the real state it left.
    h = hist(entry(0, "", "Pending"), entry(3, "Provisioning", "Held"))
    assert brief(timeline.rows(job(3, "Held", h), None, "watch")) == [
        (0, "", "Pending", WORKER, True),
        (3, "Provisioning", "Held", WORKER, True),
    ]
    # Trimmed by the bounds: what was let go of is not invented.
    h = hist(entry(40, "Failed", "Pending"), dropped=40)
    assert brief(timeline.rows(job(41, "Held", h), None, "reconcile")) == [
        (40, "Failed", "Pending", WORKER, True),
        (41, "Pending", "Held", OTHER_WRITER, True),
    ]
    _, row = timeline.rows(job(45, "Storing", h), None, "reconcile")
    assert (row.from_status, row.exact, row.message) == (
        "",
        False,
        "5 changes not observed; now Storing",
    )


def test_without_a_readable_history_the_writer_is_unknown_and_no_row_is_exact():
    for unknown in (None, History(exists=True, damaged=True)):
        rows = timeline.rows(job(1, "Estimating", unknown), (0, "Pending"), "watch")
        assert brief(rows) == [(1, "Pending", "Estimating", "watch", False)]
        (row,) = timeline.rows(job(5, "Storing", unknown), (1, "Estimating"), "watch")
        assert (row.from_status, row.actor, row.exact) == ("", "watch", False)
        assert row.message == "4 changes not observed; now Storing"


def test_history_newer_than_the_status_read_waits_for_the_next_read():
    h = hist(entry(0, "", "Pending"), entry(1, "Pending", "Estimating"))
    assert brief(timeline.rows(job(0, "Pending", h), None, "watch")) == [
        (0, "", "Pending", WORKER, True)
    ]


def test_a_told_write_is_exact_and_is_its_history_entry_when_the_record_carries_it():
    row = timeline.told(job(3, "Held", None, message="x" * 900), "Pending", "admin:ann")
    assert (row.from_status, row.actor, row.exact, len(row.message)) == (
        "Pending",
        "admin:ann",
        True,
        history.MAX_MESSAGE,
    )
    h = hist(entry(3, "Pending", "Held", by="admin:bob", message="why"))
    row = timeline.told(job(3, "Held", h), "Estimating", "admin:ann")
    assert row == timeline.of_entry(h.get(3))


def test_batch_rows_have_no_retry_count():
    record = BatchRecord(
        bid="bid0000000001",
        submission={},
        status="Held",
        last_modified="2026-11-24 10:00:00 +0000",
        message="on hold",
        status_version=1,
        history=hist(entry(0, "", "Pending")),
    )
    rows = timeline.rows(record, None, "watch")
    assert brief(rows) == [
        (0, "", "Pending", WORKER, True),
        (1, "Pending", "Held", OTHER_WRITER, True),
    ]
    assert "retry_count" not in events.values(events.BATCH_EVENTS, record, rows[1], None)


# --- writing rows: one per version, exact wins ---------------------------------------


def test_an_exact_row_replaces_an_inexact_one_and_is_never_replaced(db):
    record = job(3, "Downloading", None)
    seen = timeline.rows(record, (1, "Estimating"), "watch")
    exact = timeline.told(record, "Provisioning", WORKER)
    kind = events.JOB_EVENTS
    events.write(kind, [events.values(kind, record, r, None) for r in seen])
    assert JobEvent.objects.get().actor == "watch"
    events.write(kind, [events.values(kind, record, exact, None)])
    events.write(kind, [events.values(kind, record, seen[0], None)])  # seen again, later
    row = JobEvent.objects.get()
    assert (row.from_status, row.actor, row.exact) == ("Provisioning", WORKER, True)
    other = timeline.told(record, "Pending", "admin:ann")
    events.write(kind, [events.values(kind, record, other, None)])
    assert JobEvent.objects.get().actor == WORKER


# --- live: the follower beside the write-through -------------------------------------


def rows_of(model, **item) -> list[tuple]:
    return [
        (e.status_version, e.from_status, e.to_status, e.at, e.message, e.actor, e.exact)
        + ((e.retry_count,) if model is JobEvent else ())
        for e in model.objects.filter(**item).order_by("status_version")
    ]


def in_zookeeper(record, merritt: dict[int, tuple] | None = None) -> list[tuple]:
    """The rows an item's versions in ZooKeeper make: its history node's entries plus
    Merritt's writes (version -> the row, as ``merritt_row`` gives it)."""
    assert record.history is not None
    rows = {}
    for e in record.history.entries:
        row = timeline.of_entry(e)
        rows[e.version] = (
            row.version,
            row.from_status,
            row.to_status,
            t.parse_timestamp(row.at),
            row.message,
            row.actor,
            True,
        ) + ((row.retry_count,) if isinstance(record, JobRecord) else ())
    rows.update(merritt or {})
    return [rows[v] for v in sorted(rows)]


def merritt_row(zk, jid: str, before: str) -> tuple:
    """The row of the write Merritt's ingest just made to job ``jid``."""
    data, stat = zk.get(t.job_node(jid, "status"))
    status = t.decode_json(data)
    return (
        stat.version,
        before,
        status["status"],
        t.parse_timestamp(status["last_modified"]),
        status["message"],
        OTHER_WRITER,
        True,
        status["retry_count"],
    )


@contextmanager
def paused(runner):
    """The follower reads no job until the block ends: it sees what happened in it as one."""
    gate = threading.Event()
    real = runner._apply_jobs

    def gated(jids):
        gate.wait()
        return real(jids)

    runner._apply_jobs = gated
    try:
        yield
    finally:
        runner._apply_jobs = real
        gate.set()


def test_the_watch_reading_between_held_back_writes_leaves_no_false_step(live, follower):
    """Today's bug: the watch saw v1, then v3, and wrote "v3: Estimating -> Downloading";
    the worker's flush kept it. The steps really were Estimating -> Provisioning ->
    Downloading."""
    runner = follower()
    live.changes.default_actor = WORKER
    _, (jid,) = make_jobs(live, 1)
    with live.changes.deferred():
        record = live.job_locks.lock_job(jid)
        record = live.moves.succeed_job(record, keep_lock=True)  # v1 Estimating
        wait_for(lambda: Job.objects.get(jid=jid).status == "Estimating")
        with paused(runner):
            record = live.moves.succeed_job(record, keep_lock=True)  # v2 Provisioning
            record = live.moves.succeed_job(record, keep_lock=True)  # v3 Downloading
        wait_for(lambda: Job.objects.get(jid=jid).status_version == 3)
        record = live.moves.succeed_job(record, "downloaded")  # v4 Processing, lock let go
        wait_for(lambda: Job.objects.get(jid=jid).status_version == 4)
    steps = [
        (e.status_version, e.from_status, e.to_status, e.actor)
        for e in JobEvent.objects.filter(jid=jid)
    ]
    assert steps == [
        (0, "", "Pending", WORKER),
        (1, "Pending", "Estimating", WORKER),
        (2, "Estimating", "Provisioning", WORKER),
        (3, "Provisioning", "Downloading", WORKER),
        (4, "Downloading", "Processing", WORKER),
    ]
    assert all(JobEvent.objects.filter(jid=jid).values_list("exact", flat=True))
    assert rows_of(JobEvent, jid=jid) == in_zookeeper(live.jobs.get_job(jid))


def test_a_full_reconcile_between_the_writes_and_the_flush_leaves_no_false_step(live, follower):
    runner = follower()
    live.changes.default_actor = WORKER
    _, (jid,) = make_jobs(live, 1)
    with live.changes.deferred():
        record = live.job_locks.lock_job(jid)
        with paused(runner):
            for _ in range(3):  # Estimating, Provisioning, Downloading: the watch sees none
                record = live.moves.succeed_job(record, keep_lock=True)
            mirror.full_reconcile(live)  # then the full reconcile reads v3
        record = live.moves.succeed_job(record, "downloaded")
        wait_for(lambda: Job.objects.get(jid=jid).status_version == 4)
    assert [e.to_status for e in JobEvent.objects.filter(jid=jid)] == [
        "Pending",
        "Estimating",
        "Provisioning",
        "Downloading",
        "Processing",
    ]
    assert rows_of(JobEvent, jid=jid) == in_zookeeper(live.jobs.get_job(jid))


def test_a_worker_dead_mid_chain_leaves_the_steps_it_committed(live, follower, make_store):
    """Its held-back notices die with it: the follower alone brings its steps in."""
    runner = follower()
    _, (jid,) = make_jobs(live, 1)
    worker = make_store()
    worker.changes.default_actor = WORKER
    worker.changes.listeners = list(live.changes.listeners)
    with paused(runner), worker.changes.deferred():
        record = worker.job_locks.lock_job(jid)
        for _ in range(3):
            record = worker.moves.succeed_job(record, keep_lock=True)
        worker.changes._deferred.get()._changes.clear()  # SIGKILL: nothing is told
        worker.client.stop()  # and its session, with the job's lock, goes
    wait_for(
        lambda: not Job.objects.get(jid=jid).locked and Job.objects.get(jid=jid).status_version == 3
    )
    assert rows_of(JobEvent, jid=jid) == in_zookeeper(live.jobs.get_job(jid))


def test_merritt_s_writes_between_ours_are_its_own_rows(live, follower, make_client):
    runner = follower()
    live.changes.default_actor = WORKER
    _, (jid,) = make_jobs(live, 1)
    merritt_client = make_client()
    merritt = MerrittZK(merritt_client)
    ingest = MerrittIngest(merritt)
    assert ingest.initialize().id == jid  # Merritt's ingest moves it: Pending -> Estimating
    wait_for(lambda: Job.objects.get(jid=jid).status_version == 1)
    theirs = {1: merritt_row(merritt_client, jid, "Pending")}
    live.moves.transition_job(jid, "Failed", "stopped here")  # ours again
    record = live.jobs.get_job(jid)
    assert record.status_version == 2
    wait_for(lambda: JobEvent.objects.filter(jid=jid, status_version=2).exists())
    assert rows_of(JobEvent, jid=jid) == in_zookeeper(record, theirs)
    del runner


def test_a_jump_by_merritt_is_one_row_saying_so(live, follower, make_client):
    """A job Merritt created has no history node: the follower sees v3, then v6."""
    runner = follower()
    merritt_client = make_client()
    merritt = MerrittZK(merritt_client)
    ingest = MerrittIngest(merritt)
    ingest.submit("demo")
    (jid,) = live.jobs.list_job_ids()
    wait_for(lambda: Job.objects.filter(jid=jid).exists())
    theirs = {0: merritt_row(merritt_client, jid, "")}
    ingest.initialize()
    wait_for(lambda: Job.objects.get(jid=jid).status_version == 1)
    theirs[1] = merritt_row(merritt_client, jid, "Pending")
    for version, state in ((2, "Estimating"), (3, "Provisioning")):
        ingest.run_step(state)
        wait_for(lambda v=version: Job.objects.get(jid=jid).status_version == v)
        theirs[version] = merritt_row(merritt_client, jid, state)
    with paused(runner):
        for state in ("Downloading", "Processing", "Storing"):
            ingest.run_step(state)
    wait_for(lambda: Job.objects.get(jid=jid).status_version == 6)
    record = live.jobs.get_job(jid)
    jump = merritt_row(merritt_client, jid, "")
    assert jump[:3] == (6, "", "Recording")
    theirs[6] = (*jump[:4], "3 changes not observed; now Recording", OTHER_WRITER, False, 0)
    assert record.history is not None
    assert not record.history.exists
    assert rows_of(JobEvent, jid=jid) == in_zookeeper(record, theirs)


def test_a_batch_s_timeline_is_one_row_per_version_whoever_wrote_it(live, follower, store):
    follower()
    live.changes.default_actor = "admin:ann"
    bid = live.new_batches.create_batch(SUBMISSION).id
    live.batch_moves.hold_batch(bid, "checking")
    store.changes.default_actor = "another host"  # another process: seen by the follower only
    store.batch_moves.release_batch(bid)
    # Until the follower has caught up: a write-through refused by SQLite's shared-cache
    # lock (the follower writing at that moment) is made good by the follower's next read.
    want = in_zookeeper(live.batches.get_batch(bid))
    wait_for(lambda: rows_of(BatchEvent, bid=bid) == want)
    rows = [
        (e.status_version, e.from_status, e.to_status) for e in BatchEvent.objects.filter(bid=bid)
    ]
    assert rows == [(0, "", "Pending"), (1, "Pending", "Held"), (2, "Held", "Pending")]
