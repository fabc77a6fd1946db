"""The timeline survives the loss of the mirror: a full rebuild restores it from the history nodes.

Every status write made here leaves an entry in the item's ``history`` node; a full
reconcile into an empty database makes the same rows the write-through made, field by
field, and invents nothing the node's bounds let go of. (The whole-cluster version, the
mirror's SQLite file deleted under running workers, is in tests/faults/test_faults_mirror.py.)
"""

from __future__ import annotations

import io

from django.core.management import call_command

from batches.models import Batch, BatchEvent
from jobs.models import Job, JobEvent
from merritt_queue.core import history, snapshot
from mirror import facade as mirror
from tests.mirror.test_history import WORKER, in_zookeeper, rows_of
from tests.mirrorlive import SUBMISSION, make_jobs

pytest_plugins = ["tests.mirrorlive"]


def everything() -> tuple[list, list]:
    return (
        [
            rows_of(JobEvent, jid=j)
            for j in Job.objects.order_by("jid").values_list("jid", flat=True)
        ],
        [
            rows_of(BatchEvent, bid=b)
            for b in Batch.objects.order_by("bid").values_list("bid", flat=True)
        ],
    )


def lose_the_mirror() -> None:
    for model in (JobEvent, BatchEvent, Job, Batch):
        model.objects.all().delete()


def test_a_failed_and_resumed_job_and_a_held_batch_come_back_field_by_field(live, db):
    live.changes.default_actor = WORKER
    bid, (done, resumed) = make_jobs(live, 2)
    assert live.jobs.get_job(done).history is not None
    live.changes.default_actor = history.admin_actor("ann")
    live.batch_moves.hold_batch(bid, "rights check")
    live.batch_moves.release_batch(bid, "cleared")
    live.changes.default_actor = WORKER
    for jid in (done, resumed):
        record = live.job_locks.lock_job(jid)
        record = live.moves.succeed_job(record, keep_lock=True)  # Estimating
        record = live.moves.succeed_job(record, "provisioned", keep_lock=True)
        if jid == resumed:
            live.moves.fail_job(record, "download refused", release_lock=True)
        else:
            live.moves.succeed_job(record, "downloaded")
    live.changes.default_actor = history.admin_actor("ann")
    live.edits.resume_job(resumed, message="try again")
    before = everything()
    for jid in (done, resumed):
        assert rows_of(JobEvent, jid=jid) == in_zookeeper(live.jobs.get_job(jid))
    assert rows_of(BatchEvent, bid=bid) == in_zookeeper(live.batches.get_batch(bid))
    retried = JobEvent.objects.get(jid=resumed, to_status="Provisioning", from_status="Failed")
    assert (retried.retry_count, retried.actor, retried.message) == (1, "admin:ann", "try again")

    lose_the_mirror()
    call_command("reconcile", "--full", stdout=io.StringIO())
    assert everything() == before


def test_what_the_bounds_let_go_of_is_not_invented(live, db):
    _, (jid,) = make_jobs(live, 1)
    assert live.jobs.get_job(jid).history is not None
    for i in range(history.MAX_ENTRIES // 2 + 5):
        live.moves.hold_job(jid, f"hold {i}")
        live.moves.release_job(jid, f"release {i}")
    record = live.jobs.get_job(jid)
    assert record.history.dropped > 0
    lose_the_mirror()
    mirror.full_reconcile(live)
    rows = rows_of(JobEvent, jid=jid)
    assert rows == in_zookeeper(record)
    assert rows[0][0] == record.history.dropped  # from the first entry kept, nothing before
    assert len(rows) == len(record.history.entries) <= history.MAX_ENTRIES
    assert rows[-1][0] == record.status_version


def test_a_batch_created_here_rebuilds_its_own_rows(live, db):
    bid = live.new_batches.create_batch(dict(SUBMISSION, batchID="b-rebuild")).id
    assert live.batches.get_batch(bid).history is not None
    live.batch_moves.hold_batch(bid)
    before = rows_of(BatchEvent, bid=bid)
    assert [r[2] for r in before] == ["Pending", "Held"]
    lose_the_mirror()
    mirror.full_reconcile(live)
    assert rows_of(BatchEvent, bid=bid) == before


def test_a_periodic_reconcile_reads_only_the_changed_jobs_histories(
    live, make_store, db, monkeypatch
):
    _, jids = make_jobs(live, 3)  # mirrored as they were written
    quiet = make_store()  # a writer whose moves the mirror has not seen
    quiet.changes.default_actor = WORKER
    quiet.moves.hold_job(jids[1], "rights check")
    read: list[str] = []
    add = snapshot.add_job_histories

    def recording(client, records):
        read.extend(r.jid for r in records)
        return add(client, records)

    monkeypatch.setattr(snapshot, "add_job_histories", recording)
    mirror.full_reconcile(live)
    assert read == [jids[1]]
    assert rows_of(JobEvent, jid=jids[1]) == in_zookeeper(live.jobs.get_job(jids[1]))
    assert [r[5] for r in rows_of(JobEvent, jid=jids[1])][-1] == WORKER
