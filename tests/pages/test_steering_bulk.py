"""Bulk admin actions: more than MQ_BULK_INLINE_MAX items run as an RQ job on mq-admin."""

from __future__ import annotations

import pytest

from merritt_queue.core.queues import all_queue_names
from steering import tasks
from steering.actions.catalog import ACTIONS
from steering.models import AdminAction, AdminActionItem
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute, mirrored

queue, people, admin_queue = base.queue, base.people, base.admin_queue  # the same fixtures
job_in, work = base.job_in, base.work  # and helpers


@pytest.fixture
def bulk(settings, admin_queue):
    settings.MQ_BULK_INLINE_MAX = 2
    return admin_queue


def test_admin_queue_is_served_first():
    names = all_queue_names()
    assert names[0] == "mq-admin" and names[1:3] == ["mq-batch-reporting", "mq-express-notify"]
    # A new batch waits for the next new job, not for every job queue to empty.
    assert names[-3:-1] == ["mq-batch-pending", "mq-job-pending"] and len(names) == len(set(names))
    # Notifications never hold the pipeline: served when its queues are empty.
    assert names[-1] == "mq-notify"


def test_a_bulk_resume_runs_on_the_admin_queue(client, queue, people, bulk):
    jids = [job_in(queue, "Failed", "bulk") for _ in range(5)]
    mirrored(queue, *jids)
    client.force_login(people["operator"])
    _, done, data = confirm_and_execute(client, "job.resume", "all=1&collection=bulk")
    record = AdminAction.objects.get()
    assert done.status_code == 302 and done.url == f"/actions/{record.pk}/"
    # Nothing done yet: the request only recorded and queued it.
    assert record.finished is None and record.progress == 0 and record.total == 5
    assert AdminActionItem.objects.count() == 0
    assert all(queue.jobs.get_job(j).status == "Failed" for j in jids)
    assert bulk.count == 1
    page = client.get(done.url).content.decode()
    assert "0/5" in page and "<progress" in page and 'http-equiv="refresh"' in page
    assert "result-items" not in page
    # A double submit queues nothing more.
    again = client.post("/actions/job.resume/execute", data)
    assert again.status_code == 409 and done.url in again.content.decode()
    assert bulk.count == 1 and AdminAction.objects.count() == 1

    work(bulk)

    record.refresh_from_db()
    assert record.finished is not None and (record.done, record.skipped, record.failed) == (5, 0, 0)
    assert all(queue.jobs.get_job(j).status == "Pending" for j in jids)
    assert all(queue.jobs.get_job(j).retry_count == 1 for j in jids)
    page = client.get(done.url).content.decode()
    assert "5 done" in page and "result-items" in page and "<progress" not in page
    assert 'http-equiv="refresh"' not in page
    versions = {j: queue.jobs.get_job(j).status_version for j in jids}

    # The task run again, queued or called, changes nothing.
    tasks.enqueue(record, bulk.connection)
    work(bulk)
    assert tasks.run_admin_action(record.pk) == "already finished"
    record.refresh_from_db()
    assert (record.done, record.skipped, record.failed) == (5, 0, 0)
    assert AdminActionItem.objects.count() == 5
    assert {j: queue.jobs.get_job(j).status_version for j in jids} == versions


def test_a_task_interrupted_midway_does_not_act_twice(client, queue, people, bulk):
    jids = [job_in(queue, "Failed", "bulk") for _ in range(3)]
    mirrored(queue, *jids)
    client.force_login(people["operator"])
    confirm_and_execute(client, "job.resume", "all=1&collection=bulk")
    record = AdminAction.objects.get()
    # As if a worker had acted on the first item and died before finishing.
    first = record.pending_items[0][0]
    queue.edits.resume_job(first, message="by the first run")
    AdminActionItem.objects.create(admin_action=record, item_id=first, result="done")
    assert tasks.run_admin_action(record.pk) == "3 done"  # one before, two now
    record.refresh_from_db()
    assert (record.done, record.skipped, record.total) == (3, 0, 3) and record.finished
    assert queue.jobs.get_job(first).retry_count == 1
    assert all(queue.jobs.get_job(j).status == "Pending" for j in jids)


def test_at_the_limit_it_runs_in_the_request(client, queue, people, bulk):
    jids = [job_in(queue, "Failed", "small") for _ in range(2)]
    mirrored(queue, *jids)
    client.force_login(people["operator"])
    confirm_and_execute(client, "job.resume", "all=1&collection=small")
    record = AdminAction.objects.get()
    assert record.finished is not None and record.done == 2 and bulk.count == 0


def test_a_pipelined_bulk_move_judges_each_item_on_a_fresh_read(queue, people, monkeypatch):
    """One chunk mixing every outcome; the audit, the ZooKeeper tree and the mirror agree."""
    from batches.models import Batch
    from jobs.models import Job, JobEvent
    from steering.actions import execution as actions

    monkeypatch.setattr(actions, "MOVE_CHUNK", 4)  # several chunks, one item changing in each
    ok = [job_in(queue, "Failed", "demo") for _ in range(5)]
    changed, running, locked = (job_in(queue, s) for s in ("Failed", "Estimating", "Failed"))
    mirrored(queue, *ok, changed, running, locked)
    shown = {jid: queue.jobs.get_job(jid).status_version for jid in [*ok, changed, running, locked]}
    queue.edits.resume_job(changed, message="someone else resumed it")
    assert queue.job_locks.lock_job(locked) is not None  # a worker is running a step on it
    items = [(jid, shown[jid]) for jid in [ok[0], changed, ok[1], running, locked, *ok[2:]]]
    items.append(("jid0000000000", None))
    record = actions.execute(
        people["operator"], ACTIONS["job.resume"], items, "storage back", token="t1"
    )
    results = dict(record.items.values_list("item_id", "result"))
    assert [results[j] for j in ok] == ["done"] * 5
    assert results[changed] == results[running] == results[locked] == "skipped"
    assert results["jid0000000000"] == "failed"
    assert (record.done, record.skipped, record.failed) == (5, 3, 1)
    detail = dict(record.items.values_list("item_id", "detail"))
    assert "changed since the page was shown" in detail[changed]
    assert "locked" in detail[locked] and "Estimating" in detail[running]
    for jid in ok:
        job = queue.jobs.get_job(jid)
        assert job.retry_count == 1 and job.status != "Failed"
        row = Job.objects.get(jid=jid)
        assert (row.status, row.status_version, row.retry_count) == (
            job.status,
            job.status_version,
            job.retry_count,
        )
        assert row.collection == "demo" and row.configuration == {"collection": "demo"}
        event = JobEvent.objects.filter(jid=jid).order_by("-status_version").first()
        assert (event.from_status, event.to_status) == ("Failed", job.status)
        assert event.actor == "admin:otto" and "resumed by otto: storage back" in event.message
    assert queue.jobs.get_job(locked).status == "Failed"
    # The batch counts moved with the jobs.

    job = queue.jobs.get_job(ok[0])
    assert Batch.objects.get(bid=job.bid).job_counts == {job.status: 1}
