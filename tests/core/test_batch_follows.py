"""A reported batch follows its jobs (issue 32, finding 1): once the failed jobs of a Failed
batch are resumed and complete, the queue reports it again by itself, as Merritt's
UpdateReporting does, exactly once, with who and why in its history."""

from __future__ import annotations

import threading

from django.core import mail

from merritt_queue.core.history import WORKER_PREFIX
from merritt_queue.core.store import QueueStore
from merritt_queue.core.store.followups import report_is_stale
from merritt_queue.core.treecheck.consistency import check_tree
from merritt_queue.core.treecheck.reportchecks import KIND
from notifications.models import COMPLETION, EMAIL, Delivery, Subscription
from tests.core.test_core_store import job_in
from tests.merritt.test_merritt_side_by_side_checks import only

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


# --- when a report is out of date ------------------------------------------------------------


def test_a_report_is_stale_once_a_job_it_lists_as_failed_is_failed_no_more():
    report = {"failed_jobs": ["j1", "j2"], "successful_jobs": [], "failed_count": 2}
    assert not report_is_stale(report, ["j1", "j2"])
    assert report_is_stale(report, ["j2"])
    assert report_is_stale(report, [])


def test_a_cut_report_is_judged_by_its_total():
    report = {"failed_jobs": ["j1"], "failed_count": 300}
    assert not report_is_stale(report, ["j1", *(f"k{n}" for n in range(299))])
    assert report_is_stale(report, ["j1", *(f"k{n}" for n in range(298))])


def test_no_report_is_stale_only_when_nothing_failed():
    assert report_is_stale(None, [])
    assert not report_is_stale(None, ["j1"])


# --- the store: exactly once -------------------------------------------------------------------


def reported_failed_batch(store: QueueStore, jobs: int) -> tuple[str, list[str]]:
    """A batch reported Failed with ``jobs`` failed jobs, each resumed and now in Notify."""
    bid = store.new_batches.create_batch({"batchID": "follows", "collection": "demo"}).id
    store.batch_locks.unlock_batch(store.batch_locks.acquire_pending_batch())
    jids = [job_in(store, bid, "Failed") for _ in range(jobs)]
    batch = store.batch_moves.transition_batch(bid, "Reporting")
    store.batch_moves.write_status_report(bid, jids, [])
    store.batch_moves.transition_batch(batch, "Failed", f"0 completed, {jobs} failed, 0 deleted")
    for jid in jids:
        store.moves.transition_job(store.jobs.get_job(jid), "Notify", retry=True)
    return bid, jids


def test_the_last_failed_job_completing_moves_the_batch_to_update_reporting(store):
    bid, (first, last) = reported_failed_batch(store, 2)
    store.moves.transition_job(first, "Completed")
    assert store.followups.follow_jobs(bid, first) is None  # the other one still runs
    store.moves.transition_job(last, "Completed")
    moved = store.followups.follow_jobs(bid, last)
    assert moved is not None and moved.status == "UpdateReporting"
    assert f"job {last} completed after a resume" in moved.message
    assert "the last report listed 2 failed; none failed now" in moved.message
    assert store.followups.follow_jobs(bid, last) is None  # asked again: nothing more
    assert store.batches.get_batch(bid).status == "UpdateReporting"


def test_a_resumed_job_that_fails_again_leaves_the_batch_as_reported(store):
    bid, (jid,) = reported_failed_batch(store, 1)
    store.moves.transition_job(jid, "Failed", "still broken")
    assert store.followups.follow_jobs(bid, jid) is None
    assert store.batches.get_batch(bid).status == "Failed"


def test_two_workers_finishing_the_last_two_jobs_at_once_move_the_batch_once(store, make_store):
    bid, jids = reported_failed_batch(store, 2)
    workers = [make_store(), make_store()]
    for jid in jids:
        store.moves.transition_job(jid, "Completed")
    start = threading.Barrier(2)
    moved: list = [None, None]

    def finish(i: int) -> None:
        start.wait()
        moved[i] = workers[i].followups.follow_jobs(bid, jids[i])

    threads = [threading.Thread(target=finish, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(m is not None for m in moved) == 1
    entries = [
        e for e in store.batches.get_batch(bid).history.entries if e.to_status == "UpdateReporting"
    ]
    assert len(entries) == 1


def test_a_batch_left_failed_by_a_lost_follow_is_found_and_repaired_by_the_check(store):
    bid, (jid,) = reported_failed_batch(store, 1)
    store.moves.transition_job(jid, "Completed")  # and the worker died before following its batch
    found = only(check_tree(store), KIND)
    assert found.path == f"/batches/{bid}" and "lists 1 failed job(s) where 0" in found.reason
    assert store.batches.get_batch(bid).status == "Failed"  # a check alone writes nothing
    assert only(check_tree(store, repair=True), KIND).repaired
    batch = store.batches.get_batch(bid)
    assert batch.status == "UpdateReporting" and "queue's check" in batch.message
    assert check_tree(store) == []


def test_a_failed_batch_whose_report_is_true_is_no_finding(store):
    bid, (jid,) = reported_failed_batch(store, 1)
    store.moves.transition_job(jid, "Failed", "still broken")
    assert [f for f in check_tree(store) if f.kind == KIND] == []


# --- the pipeline: reported again, the depositor told ------------------------------------------


def test_a_fixed_batch_is_reported_again_by_itself(pipeline, content):
    names = ("late1.txt", "late2.txt", "late3.txt")
    lines = "".join(f"{content.url}/{n} | | | | | {n}\n" for n in names)
    (content.root / "three.checkm").write_text(
        "#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/"
        "mrt-single-file-batch-manifest\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | "
        "nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName\n" + lines + "#%eof\n"
    )
    bid = pipeline.submit(
        type="single-file-batch-manifest", payload_url=f"{content.url}/three.checkm"
    )
    batch = pipeline.run(bid)
    assert batch.status == "Failed" and batch.message.startswith("0 completed, 3 failed")

    # The depositor asked to hear of the batch's completion (notifications app).
    told = Subscription.objects.create(
        bid=bid, channel=EMAIL, target="depositor@example.org", events=COMPLETION
    )
    for name in names:
        (content.root / name).write_text(f"{name} at last\n")
    mail.outbox.clear()
    for job in pipeline.jobs(bid):
        pipeline.store.edits.resume_job(job.jid, message="the files are there now")
    batch = pipeline.run(bid, until=lambda b: b.status == "Completed")

    assert batch.message.startswith("3 completed, 0 failed"), batch.message
    assert batch.status_report["failed_jobs"] == [] and batch.status_report["failed_count"] == 0
    moves = [(e.from_status, e.to_status) for e in batch.history.entries]
    assert moves[-2:] == [("Failed", "UpdateReporting"), ("UpdateReporting", "Completed")]
    by_queue = batch.history.entries[-2]
    assert by_queue.by.startswith(WORKER_PREFIX)
    assert "reported again by the queue" in by_queue.message
    (message,) = [m for m in mail.outbox if bid in m.subject]
    assert "3 completed, 0 failed" in message.subject
    assert "Since the last report:\nnow completed" in message.body
    delivery = Delivery.objects.get(subscription=told)
    assert delivery.event_id == f"batch:{bid}:{batch.status_version}"
