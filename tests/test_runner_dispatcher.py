"""The step runner and the dispatcher, on a real ZooKeeper and a real Redis."""

from __future__ import annotations

import uuid

import pytest
from rq import Queue

from merritt_queue import dispatcher as d
from merritt_queue.dispatcher import Dispatcher, DispatcherConfig
from merritt_queue.runner import Outcome, StepResult, run_job_step


@pytest.fixture
def batch(store) -> str:
    bid = store.create_batch({"batchID": str(uuid.uuid4())}).id
    store.unlock_batch(store.acquire_pending_batch())
    return bid


def test_a_successful_step_commits_and_unlocks_in_one_write(store, batch):
    jid = store.create_job(batch, {})
    seen = []

    def handler(job):
        seen.append(job.jid)
        return Outcome.success("estimated")

    report = run_job_step(store, jid, "Pending", handler)
    assert report.result == StepResult.COMMITTED and seen == [jid]
    job = store.get_job(jid)
    assert job.status == "Estimating" and job.message == "estimated" and not job.locked


def test_a_handler_exception_fails_the_job_with_the_reason(store, batch):
    jid = store.create_job(batch, {})

    def handler(job):
        raise RuntimeError("disk on fire")

    report = run_job_step(store, jid, "Pending", handler)
    job = store.get_job(jid)
    assert report.result == StepResult.COMMITTED
    assert job.status == "Failed" and "RuntimeError: disk on fire" in job.message and not job.locked


def test_a_step_that_must_wait_stays_and_unlocks(store, batch):
    jid = store.create_job(batch, {})
    report = run_job_step(store, jid, "Pending", lambda job: Outcome.later("short of disk", 5))
    assert report.result == StepResult.DEFERRED and report.outcome.delay == 5
    job = store.get_job(jid)
    assert job.status == "Pending" and not job.locked


def test_a_stale_or_busy_step_does_nothing(store, make_store, batch):
    jid = store.create_job(batch, {})
    assert run_job_step(store, jid, "Estimating", pytest.fail).result == StepResult.STALE
    make_store().lock_job(jid)
    assert run_job_step(store, jid, "Pending", pytest.fail).result == StepResult.BUSY
    assert store.get_job(jid).status == "Pending"


def test_nothing_starts_while_the_queue_is_paused(store, batch):
    jid = store.create_job(batch, {})
    store.pause_queue()
    assert run_job_step(store, jid, "Pending", pytest.fail).result == StepResult.PAUSED
    assert not store.get_job(jid).locked


def test_a_step_whose_job_changed_meanwhile_is_abandoned(store, make_store, batch):
    jid = store.create_job(batch, {})
    admin = make_store()

    def handler(job):
        admin.hold_job(jid, "librarian held it mid-step")
        return Outcome.success()

    report = run_job_step(store, jid, "Pending", handler)
    job = store.get_job(jid)
    assert report.result == StepResult.ABANDONED
    assert job.status == "Held" and not job.locked


def test_a_handler_that_changes_priority_commits_the_moved_index(store, zk, batch):
    jid = store.create_job(batch, {})

    def handler(job):
        return Outcome.success("", job=store.set_priority(job, 7))

    run_job_step(store, jid, "Pending", handler)
    assert zk.get_children("/jobs/states/estimating") == [f"07-{jid}"]
    assert zk.get_children("/jobs/states/pending") == []


# --- dispatcher ------------------------------------------------------------


def test_the_sweep_enqueues_each_job_once_in_priority_order(store, redis, batch):
    low = store.create_job(batch, {}, priority=9)
    high = store.create_job(batch, {}, priority=1)
    disp = Dispatcher(store, redis)
    assert disp.sweep() >= 2
    queue = Queue(d.job_queue_name("Pending"), connection=redis)
    assert [j.args for j in queue.jobs] == [(high, "Pending"), (low, "Pending")]
    assert disp.sweep() == 0, "a second sweep must not enqueue duplicates"


def test_a_locked_job_is_not_enqueued(store, make_store, redis, batch):
    jid = store.create_job(batch, {})
    make_store().lock_job(jid)
    Dispatcher(store, redis).sweep()
    assert Queue(d.job_queue_name("Pending"), connection=redis).count == 0


def test_nothing_is_enqueued_while_paused(store, redis, batch):
    store.create_job(batch, {})
    store.pause_queue()
    assert Dispatcher(store, redis).sweep() == 0
    store.unpause_queue()
    assert Dispatcher(store, redis).sweep() == 1


def test_redis_flushed_the_next_sweep_rebuilds_the_queues(store, redis, batch):
    jids = {store.create_job(batch, {}) for _ in range(3)}
    disp = Dispatcher(store, redis)
    disp.sweep()
    redis.flushdb()
    disp.sweep()
    queue = Queue(d.job_queue_name("Pending"), connection=redis)
    assert {j.args[0] for j in queue.jobs} == jids


def test_a_deferred_step_waits_for_its_delay(store, redis, batch):
    jid = store.create_job(batch, {})
    d.defer(redis, d.rq_job_id("job", jid, "Pending"), 60)
    assert Dispatcher(store, redis).sweep() == 0


def test_look_ahead_bounds_how_many_wait_per_state(store, redis, batch):
    for _ in range(8):
        store.create_job(batch, {})
    disp = Dispatcher(store, redis, DispatcherConfig(ahead=3))
    disp.sweep()
    assert Queue(d.job_queue_name("Pending"), connection=redis).count == 3


def test_batches_pending_and_finished_are_enqueued(store, redis):
    pending = store.create_batch({}).id
    done = store.create_batch({}).id
    batch = store.begin_batch(done)
    jid = store.create_job(done, {})
    store.start_processing(batch)
    store.transition_job(jid, "Failed", "x")
    Dispatcher(store, redis).sweep()
    assert [j.args for j in Queue(d.BATCH_PENDING_QUEUE, connection=redis).jobs] == [
        (pending, "Pending")
    ]
    assert [j.args for j in Queue(d.BATCH_REPORT_QUEUE, connection=redis).jobs] == [
        (done, "Processing")
    ]


def test_a_watch_wakes_the_dispatcher_when_a_job_arrives(store, redis, batch):
    disp = Dispatcher(store, redis)
    disp.install_watches()
    disp.sweep_dirty()
    disp.wake.clear()
    store.create_job(batch, {})
    assert disp.wake.wait(5), "no watch event for a new pending job"
    assert disp.sweep_dirty() == 1
    disp.stop.set()


def test_a_waiting_step_tells_why_without_moving_the_job(store, zk, batch):
    jid = store.create_job(batch, {})
    before = store.get_job(jid)
    run_job_step(store, jid, "Pending", lambda job: Outcome.later("waiting for disk space", 1))
    job = store.get_job(jid)
    assert (job.status, job.message, job.locked) == ("Pending", "waiting for disk space", False)
    assert job.status_version == before.status_version + 1
    assert zk.get_children("/jobs/states/pending") == [f"05-{jid}"]
