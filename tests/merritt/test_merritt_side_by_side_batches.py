"""Batches beside Merritt's own ingest on one ZooKeeper ensemble (issue 13, points 1, 3-5).

The other writer is ``harness/merrittzk.py``, a replay of MerrittZK and of mrt-ingest's
consumers, on its own session. The contract checked:

1. A batch is reported only once no job of it is left in ``batch-processing``, whoever
   set its status (Merritt's ingest sets Reporting while its jobs still run).
3. A held batch never looks acquirable to MerrittZK, a hold is refused while anyone holds
   the batch lock, and a released batch looks like a fresh Pending batch again.
4. A deleted batch leaves nothing MerrittZK's reporting trips on: later batches are
   reported.
5. The worker mode (``MQ_WORKERS``) decides what our workers take; whatever they may not
   run is left alone (never failed) and shown as "Merritt ingest".
"""

from __future__ import annotations

import posixpath
import time

import pytest
from rq import Queue, SimpleWorker

from batches.models import Batch
from door.submission import SubmissionError, submit
from harness.merrittzk import JOB_SUCCESS, Item, MerrittIngest, MerrittStateError, MerrittZK
from merritt_queue.core import history
from merritt_queue.core import tree as t
from merritt_queue.core.dispatcher import Dispatcher, DispatcherConfig
from merritt_queue.core.errors import InvalidTransition, Locked, QueueError
from merritt_queue.core.queues import all_queue_names
from merritt_queue.core.sides import CREATED_BY, CREATED_BY_KEY, reports_batch, runs_batch, runs_job
from merritt_queue.project import checks
from merritt_queue.project.tasks import TASKS
from pipeline import batchhandlers as handlers
from tests.roles import viewer

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

OUR_FORMAT = {"type": "file", "payload_url": "http://example.org/a.txt", "profile": "demo"}


@pytest.fixture
def merritt(make_client) -> MerrittZK:
    return MerrittZK(make_client())


def subtree(client, root: str) -> dict[str, object]:
    """Relative path -> data of every node under ``root``, timestamps and messages aside,
    and our ``history`` (the one node of ours MerrittZK's items lack, and never read)."""
    out: dict[str, object] = {}

    def walk(path: str) -> None:
        data, _ = client.get(path)
        rel = posixpath.relpath(path, root)
        if rel == history.NODE:
            return
        if rel.endswith("status"):
            data = {k: v for k, v in t.decode_json(data).items() if k == "status"}
        out[rel] = data
        for child in client.get_children(path):
            walk(f"{path}/{child}")

    walk(root)
    return out


def step(pipeline, workers: str = "all") -> int:
    """One sweep of a dispatcher in ``workers`` mode and one burst of the workers."""
    Dispatcher(
        pipeline.store, pipeline.redis, TASKS, DispatcherConfig(ahead=50, workers=workers)
    ).sweep()
    queues = [Queue(n, connection=pipeline.redis) for n in all_queue_names()]
    before = sum(q.count for q in queues)
    SimpleWorker(queues, connection=pipeline.redis).work(burst=True, logging_level="WARNING")
    return before


# --- 1. reporting waits for the last job -------------------------------------------


def test_a_batch_merritt_set_reporting_is_reported_once_its_jobs_are_done(
    pipeline,
    merritt,
    mailoutbox,
):
    ingest = MerrittIngest(merritt)
    batch = ingest.submit("demo", objects=2, payload_url="http://example.org/hello.txt")
    assert pipeline.store.batches.get_batch(batch.id).status == "Reporting"

    for _ in range(3):
        step(pipeline)
    early = pipeline.store.batches.get_batch(batch.id)
    assert early.status == "Reporting", early.message
    assert early.status_report is None

    ingest.initialize()  # one job on its way, one still Pending
    step(pipeline)
    assert pipeline.store.batches.get_batch(batch.id).status == "Reporting"

    ingest.finish_jobs()  # the first to the end
    ingest.initialize()
    step(pipeline)
    assert pipeline.store.batches.get_batch(batch.id).status == "Reporting"
    for state in JOB_SUCCESS:
        ingest.run_step(state)

    reported = pipeline.run(batch.id)
    assert reported.status == "Completed", reported.message
    assert reported.status_report["successful_count"] == 2
    assert reported.status_report["failed_count"] == 0
    step(pipeline)
    assert len([m for m in mailoutbox if "2 completed" in m.subject]) == 1


def test_merrittzk_that_read_a_batch_just_before_we_reported_it_cannot_report_it_again(
    pipeline, merritt, settings, mailoutbox
):
    """MerrittZK's reporter (``Batch.acquireBatchForReporting``) reads a batch's status, then
    takes its lock, then reports on what it read, writing the status unversioned. Read just
    before our report, the batch must still be locked when that reporter tries the lock."""
    # Long enough that a loaded machine still tries the lock within it (1 s was not, once).
    settings.MQ_REPORT_LOCK_GRACE = 4.0
    ingest = MerrittIngest(merritt)
    batch = ingest.submit("demo", objects=1, payload_url="http://example.org/hello.txt")
    ingest.finish_jobs()
    stale = merritt.load(Item("batch", batch.id))  # the first half of Merritt's acquire
    assert stale.status == "Reporting"

    assert pipeline.run(batch.id).status == "Completed"
    assert not merritt.lock(stale)  # the second half: refused, so it reports nothing
    # Nobody works on the batch meanwhile: the record its move wrote has it released.
    assert not Batch.objects.get(bid=batch.id).locked

    lock = t.batch_node(batch.id, "lock")
    ends = time.monotonic() + 20
    while pipeline.store.client.exists(lock) and time.monotonic() < ends:
        time.sleep(0.05)
    assert not pipeline.store.client.exists(lock)  # released once the grace is over
    assert merritt.acquire_batch_for_reporting() is None  # a fresh read sees it reported
    step(pipeline)
    assert len([m for m in mailoutbox if "1 completed" in m.subject]) == 1


# --- 3. held batches --------------------------------------------------------------


def test_a_batch_held_here_is_never_acquired_by_merrittzk_and_released_looks_fresh(store, merritt):
    bid = store.new_batches.create_batch(dict(OUR_FORMAT)).id
    store.batch_moves.hold_batch(bid, "held by an operator")
    assert merritt.acquire_pending_batch() is None
    assert store.batches.get_batch(bid).status == "Held"
    assert not store.batches.get_batch(bid).locked

    store.batch_moves.release_batch(bid, "released by an operator")
    fresh = merritt.create_batch(dict(OUR_FORMAT))
    assert subtree(store.client, t.batch_path(bid)) == subtree(store.client, fresh.path)
    acquired = merritt.acquire_pending_batch()
    assert acquired is not None and acquired.id == bid


def test_a_batch_held_by_its_collection_is_never_acquired_by_merrittzk(store, merritt):
    bid = store.new_batches.create_batch(dict(OUR_FORMAT, collection="held")).id
    store.holds.hold_collection("held")
    assert store.batch_locks.begin_batch(bid) is None
    assert store.batches.get_batch(bid).status == "Held"
    assert merritt.acquire_pending_batch() is None

    store.holds.release_collection("held")
    assert store.held.release_collection_items("held").released == [bid]
    acquired = merritt.acquire_pending_batch()
    assert acquired is not None and acquired.id == bid


def test_a_hold_is_refused_while_merrittzk_holds_the_batch_lock(store, merritt):
    bid = store.new_batches.create_batch(dict(OUR_FORMAT)).id
    assert merritt.lock(Item("batch", bid))
    with pytest.raises(Locked, match="not held"):
        store.batch_moves.hold_batch(bid)
    assert store.batches.get_batch(bid).status == "Pending"
    assert not store.client.exists(t.batch_states(bid))


def test_a_reserved_batch_stays_reserved_through_hold_and_release(store, merritt):
    bid = store.new_batches.create_batch(
        dict(OUR_FORMAT, **{CREATED_BY_KEY: CREATED_BY}), reserved=True
    ).id
    assert merritt.acquire_pending_batch() is None
    store.batch_moves.hold_batch(bid)
    store.batch_moves.release_batch(bid)
    assert store.batches.get_batch(bid).status == "Pending"
    assert merritt.acquire_pending_batch() is None
    assert store.batch_locks.begin_batch(bid) is not None  # ours still takes it


# --- 4. deleted batches -------------------------------------------------------------


def failed_merritt_batch(ingest: MerrittIngest) -> Item:
    """A batch whose one job failed at Estimating, reported Failed by Merritt's ingest."""
    batch = ingest.submit("other", objects=1)
    ingest.initialize()
    job = ingest.zk.acquire_job("Estimating")
    ingest.zk.set_status(job, "Failed", "no such file")
    ingest.zk.unlock(job)
    assert ingest.report().id == batch.id
    return batch


def test_a_batch_deleted_here_does_not_block_merritts_reporting(store, merritt):
    ingest = MerrittIngest(merritt)
    deleted = failed_merritt_batch(ingest)
    assert store.batches.get_batch(deleted.id).status == "Failed"
    store.batch_moves.delete_batch(deleted.id, "deleted by an administrator")

    later = ingest.submit("other", objects=1)
    ingest.finish_jobs()
    reported = ingest.report()  # threw MerrittStateError on the Deleted batch
    assert reported is not None and reported.id == later.id
    assert store.batches.get_batch(later.id).status == "Completed"
    assert store.batches.get_batch(deleted.id).status == "Deleted"
    assert ingest.report() is None


def test_no_job_of_a_batch_deleted_here_goes_back_to_work_by_any_caller(store, merritt):
    """The store refuses it (steering's pages refuse earlier, with the same reason): a
    deleted batch's empty batch-processing stays empty, for MerrittZK's cleanup."""
    ingest = MerrittIngest(merritt)
    deleted = failed_merritt_batch(ingest)
    (jid,) = merritt.batch_jobs(deleted, "batch-failed")
    store.batch_moves.delete_batch(deleted.id, "deleted by an administrator")
    with pytest.raises(InvalidTransition, match=f"batch {deleted.id} was deleted"):
        store.edits.resume_job(jid)
    assert store.jobs.get_job(jid).status == "Failed"
    assert store.client.get_children(t.batch_job_dir(deleted.id, "batch-processing")) == []
    assert ingest.report() is None  # its tombstone lock: nothing for MerrittZK to throw on


def test_a_delete_is_refused_while_a_job_of_the_batch_is_processing(store, merritt):
    ingest = MerrittIngest(merritt)
    batch = failed_merritt_batch(ingest)
    job = merritt.load(Item("job", merritt.batch_jobs(batch, "batch-failed")[0]))
    ingest.requeue(job, "Pending")
    with pytest.raises(QueueError, match="not finished"):
        store.batch_moves.delete_batch(batch.id)
    assert store.batches.get_batch(batch.id).status == "Failed"
    assert store.client.get_children(t.batch_job_dir(batch.id, "batch-processing"))


# --- 5. two consumers of one Pending queue -------------------------------------------


def test_own_mode_runs_our_batches_and_leaves_merritts_alone(
    pipeline,
    content,
    merritt,
    settings,
):
    settings.MQ_WORKERS = "own"
    theirs = merritt.create_batch({"type": "file", "profile": "demo", "filename": "a.txt"})
    formatted = merritt.create_batch(dict(OUR_FORMAT, payload_url=f"{content.url}/call911.jpg"))
    ours = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    assert merritt.acquire_pending_batch().id == theirs.id  # never ours: it is reserved
    merritt.unlock(theirs)

    for _ in range(30):
        if pipeline.store.batches.get_batch(ours).status == "Completed":
            break
        step(pipeline, "own")
    assert pipeline.store.batches.get_batch(ours).status == "Completed"
    left = pipeline.store.batches.get_batch(formatted.id)
    assert (left.status, left.acquired, left.locked) == ("Pending", False, False)
    job = pipeline.jobs(ours)[0]
    assert job.configuration[CREATED_BY_KEY] == CREATED_BY


def test_all_mode_leaves_a_batch_in_merritts_format_alone(pipeline, merritt):
    theirs = merritt.create_batch({"type": "file", "profile": "demo", "filename": "a.txt"})
    for _ in range(3):
        step(pipeline, "all")
    left = pipeline.store.batches.get_batch(theirs.id)
    assert (left.status, left.acquired, left.locked) == ("Pending", False, False)
    assert merritt.acquire_pending_batch().id == theirs.id


def test_a_batch_left_to_merritt_is_not_held_here_when_its_collection_is(
    pipeline, merritt, settings
):
    """A worker handed a batch it leaves to Merritt's ingest (the dispatcher never enqueues
    one, but a step queued under another mode may run) leaves it exactly as it was, even
    when its collection is held: holding it is Merritt's ingest's business."""
    settings.MQ_WORKERS = "own"
    theirs = merritt.create_batch(dict(OUR_FORMAT))
    pipeline.store.holds.hold_collection("demo")
    from pipeline.services import get_services

    assert handlers.run_pending(get_services(), theirs.id) == handlers.MERRITT
    left = pipeline.store.batches.get_batch(theirs.id)
    assert (left.status, left.acquired, left.locked) == ("Pending", False, False)


def test_none_mode_enqueues_nothing_runs_nothing_and_refuses_submissions(
    pipeline,
    settings,
):
    settings.MQ_HANDOVER = False  # what the dispatcher enqueues is the question here
    bid = pipeline.submit(type="file", payload_url="http://example.org/a.txt")
    settings.MQ_WORKERS = "none"
    assert step(pipeline, "none") == 0
    assert pipeline.store.batches.get_batch(bid).status == "Pending"
    from pipeline.services import get_services

    assert handlers.run_pending(get_services(), bid) == "refused"
    with pytest.raises(SubmissionError, match="MQ_WORKERS=none"):
        submit({"type": "file", "payload_url": "http://example.org/b.txt", "profile": "demo"})


def test_the_rule_of_each_mode():
    marked = dict(OUR_FORMAT, **{CREATED_BY_KEY: CREATED_BY})
    merritts = {"type": "file", "filename": "a.txt"}
    assert [runs_batch(m, marked) for m in ("all", "own", "none")] == [True, True, False]
    assert [runs_batch(m, OUR_FORMAT) for m in ("all", "own", "none")] == [True, False, False]
    assert [runs_batch(m, merritts) for m in ("all", "own", "none")] == [False, False, False]
    job = {"payload_url": "u", "payload_type": "file", CREATED_BY_KEY: CREATED_BY}
    assert runs_job("own", job) and not runs_job("own", {"payload_url": "u"})
    # A report reads only the job directories: in ``all`` any batch is ours to report (its
    # jobs may have been written by another system in our format); in ``own`` only ours.
    assert [reports_batch(m, merritts) for m in ("all", "own", "none")] == [True, False, False]
    assert [reports_batch(m, marked) for m in ("all", "own", "none")] == [True, True, False]


def test_an_unknown_worker_mode_is_refused_at_start(settings):
    settings.MQ_WORKERS = "mine"
    (error,) = checks.check_workers()
    assert error.id == "mq.E031" and "own" in error.msg and "none" in error.msg
    settings.MQ_WORKERS = "own"
    assert checks.check_workers() == []


def test_a_merritt_error_is_not_thrown_on_a_held_batch(store, merritt):
    """The symptom of point 3 on the old code: Held -> Processing thrown, lock leaked."""
    bid = store.new_batches.create_batch(dict(OUR_FORMAT)).id
    store.batch_moves.hold_batch(bid)
    try:
        merritt.acquire_pending_batch()
    except MerrittStateError as e:  # pragma: no cover - the old behaviour
        pytest.fail(f"MerrittZK threw on a held batch: {e}")
    assert not store.client.exists(t.batch_node(bid, "lock"))


@pytest.mark.django_db
def test_items_left_to_merritt_are_shown_as_merritt_ingest(client, django_user_model, settings):
    from django.utils import timezone

    from batches.models import Batch
    from jobs.models import Job

    settings.MQ_WORKERS = "own"
    client.force_login(viewer(django_user_model.objects.create_user("librarian")))
    now = timezone.now()
    marked = dict(OUR_FORMAT, **{CREATED_BY_KEY: CREATED_BY})
    for bid, submission in (("bid0000000001", marked), ("bid0000000002", OUR_FORMAT)):
        Batch.objects.create(
            bid=bid, status="Pending", submitted=now, submission=submission, read_at=now
        )
    Job.objects.create(
        jid="jid0000000001",
        batch_id="bid0000000002",
        status="Pending",
        priority=5,
        configuration={"payload_url": "http://example.org/a", "payload_type": "file"},
        last_modified=now,
        read_at=now,
    )
    assert client.get("/batches/").content.decode().count("Merritt ingest") == 1
    assert "Merritt ingest" not in client.get("/batches/bid0000000001/").content.decode()
    assert "Merritt ingest" in client.get("/batches/bid0000000002/").content.decode()
    assert "Merritt ingest" in client.get("/jobs/jid0000000001/").content.decode()
    settings.MQ_WORKERS = "all"
    assert "Merritt ingest" not in client.get("/batches/").content.decode()
