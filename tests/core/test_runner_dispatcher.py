"""The step runner and the dispatcher, on a real ZooKeeper and a real Redis."""

from __future__ import annotations

import time
import uuid

import pytest
from rq import Queue
from rq.utils import import_attribute

from merritt_queue.core import queues as q
from merritt_queue.core.dispatcher import Dispatcher, DispatcherConfig
from merritt_queue.core.errors import ChangedUnderYou
from merritt_queue.core.lanes import job_queue_name
from merritt_queue.core.pauseflag import pause_flag
from merritt_queue.core.runner import ChainPolicy, Outcome, StepResult, run_job_step, run_job_steps
from merritt_queue.core.store import ItemLock
from merritt_queue.project import checks
from merritt_queue.project.tasks import TASKS

# A submission and a job configuration in this project's format: the dispatcher leaves any
# other to Merritt's own ingest (merritt_queue/core/sides.py).
SUBMISSION = {"type": "file", "payload_url": "http://example.org/a.txt"}
CONFIGURATION = {"payload_url": "http://example.org/a.txt", "payload_type": "file"}


@pytest.fixture
def batch(store) -> str:
    bid = store.new_batches.create_batch(SUBMISSION | {"batchID": str(uuid.uuid4())}).id
    store.batch_locks.unlock_batch(store.batch_locks.acquire_pending_batch())
    return bid


def test_a_successful_step_commits_and_unlocks_in_one_write(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    seen = []

    def handler(job):
        seen.append(job.jid)
        return Outcome.success("estimated")

    report = run_job_step(store, jid, "Pending", handler)
    assert report.result == StepResult.COMMITTED and seen == [jid]
    job = store.jobs.get_job(jid)
    assert job.status == "Estimating" and job.message == "estimated" and not job.locked


def test_a_handler_exception_fails_the_job_with_the_reason(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)

    def handler(job):
        raise RuntimeError("disk on fire")

    report = run_job_step(store, jid, "Pending", handler)
    job = store.jobs.get_job(jid)
    assert report.result == StepResult.COMMITTED
    assert job.status == "Failed" and "RuntimeError: disk on fire" in job.message and not job.locked


def test_a_step_that_must_wait_stays_and_unlocks(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    report = run_job_step(store, jid, "Pending", lambda job: Outcome.later("short of disk", 5))
    assert report.result == StepResult.DEFERRED and report.outcome.delay == 5
    job = store.jobs.get_job(jid)
    assert job.status == "Pending" and not job.locked


def test_a_stale_or_busy_step_does_nothing(store, make_store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    assert run_job_step(store, jid, "Estimating", pytest.fail).result == StepResult.STALE
    make_store().job_locks.lock_job(jid)
    assert run_job_step(store, jid, "Pending", pytest.fail).result == StepResult.BUSY
    assert store.jobs.get_job(jid).status == "Pending"


def test_nothing_starts_while_the_queue_is_paused(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    store.pause.pause_queue()
    assert run_job_step(store, jid, "Pending", pytest.fail).result == StepResult.PAUSED
    assert not store.jobs.get_job(jid).locked


def test_a_step_whose_job_changed_meanwhile_is_abandoned(store, make_store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    admin = make_store()

    def handler(job):
        admin.moves.hold_job(jid, "librarian held it mid-step")
        return Outcome.success()

    report = run_job_step(store, jid, "Pending", handler)
    job = store.jobs.get_job(jid)
    assert report.result == StepResult.ABANDONED
    assert job.status == "Held" and not job.locked


def test_a_handler_that_changes_priority_commits_the_moved_index(store, zk, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)

    def handler(job):
        return Outcome.success("", job=store.job_data.set_priority(job, 7))

    run_job_step(store, jid, "Pending", handler)
    assert zk.get_children("/jobs/states/estimating") == [f"07-{jid}"]
    assert zk.get_children("/jobs/states/pending") == []


# --- dispatcher ------------------------------------------------------------


def test_the_sweep_enqueues_each_job_once_in_priority_order(store, redis, batch):
    low = store.new_jobs.create_job(batch, CONFIGURATION, priority=9)
    high = store.new_jobs.create_job(batch, CONFIGURATION, priority=1)
    disp = Dispatcher(store, redis, TASKS)
    assert disp.sweep() >= 2
    queue = Queue(job_queue_name("Pending"), connection=redis)
    assert [j.args for j in queue.jobs] == [(high, "Pending"), (low, "Pending")]
    assert disp.sweep() == 0, "a second sweep must not enqueue duplicates"


def test_a_more_urgent_job_goes_ahead_of_those_already_waiting_in_rq(store, redis, batch):
    """RQ serves first in, first out: a small deposit's job, enqueued after a big batch's
    backlog, must still be served first (bench latency: busy p95)."""
    backlog = [store.new_jobs.create_job(batch, CONFIGURATION, priority=7) for _ in range(3)]
    disp = Dispatcher(store, redis, TASKS)
    assert disp.sweep() == 3
    urgent = store.new_jobs.create_job(batch, CONFIGURATION, priority=5)
    more = store.new_jobs.create_job(batch, CONFIGURATION, priority=2)
    late = store.new_jobs.create_job(batch, CONFIGURATION, priority=9)
    assert disp.sweep_job_state("Pending") == 3
    queue = Queue(job_queue_name("Pending"), connection=redis)
    assert [j.args[0] for j in queue.jobs] == [more, urgent, *backlog, late]


def test_an_event_after_a_quiet_spell_is_served_at_once(store, redis, batch):
    """The settle time coalesces bursts; it must not delay the first event after a quiet
    spell (a small deposit on an idle queue waited a whole settle at each hand-over)."""
    import threading

    disp = Dispatcher(store, redis, TASKS, DispatcherConfig(settle=3.0, sweep_interval=60))
    runner = threading.Thread(target=disp.run, daemon=True)
    runner.start()
    queue = Queue(job_queue_name("Pending"), connection=redis)
    try:
        time.sleep(3.5)  # the first sweep and its settle are over: the queue is quiet
        store.new_jobs.create_job(batch, CONFIGURATION)
        deadline = time.monotonic() + 2.0  # under the settle time
        while not queue.count:
            assert time.monotonic() < deadline, "the new job waited for the settle time"
            time.sleep(0.02)
    finally:
        disp.stop.set()
        disp.wake.set()
        runner.join(10)


def test_a_locked_job_is_not_enqueued(store, make_store, redis, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    make_store().job_locks.lock_job(jid)
    Dispatcher(store, redis, TASKS).sweep()
    assert Queue(job_queue_name("Pending"), connection=redis).count == 0


def test_nothing_is_enqueued_while_paused(store, redis, batch):
    store.new_jobs.create_job(batch, CONFIGURATION)
    store.pause.pause_queue()
    assert Dispatcher(store, redis, TASKS).sweep() == 0
    store.pause.unpause_queue()
    assert Dispatcher(store, redis, TASKS).sweep() == 1


def test_redis_flushed_the_next_sweep_rebuilds_the_queues(store, redis, batch):
    jids = {store.new_jobs.create_job(batch, CONFIGURATION) for _ in range(3)}
    disp = Dispatcher(store, redis, TASKS)
    disp.sweep()
    redis.flushdb()
    disp.sweep()
    queue = Queue(job_queue_name("Pending"), connection=redis)
    assert {j.args[0] for j in queue.jobs} == jids


def test_a_deferred_step_waits_for_its_delay(store, redis, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    q.defer(redis, q.rq_job_id("job", jid, "Pending"), 60)
    assert Dispatcher(store, redis, TASKS).sweep() == 0


def test_a_job_taken_off_its_queue_but_never_started_is_enqueued_again(store, redis, batch):
    """A worker stopped between dequeueing and starting leaves the RQ job marked queued in
    no queue (found by the mirror fault test under load); the item must not be lost."""
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    queue = Queue(job_queue_name("Pending"), connection=redis)
    disp = Dispatcher(store, redis, TASKS, DispatcherConfig(started_grace=0))
    assert disp.sweep() == 1
    assert queue.pop_job_id() == q.rq_job_id("job", jid, "Pending")  # what the worker took
    assert Dispatcher(store, redis, TASKS, DispatcherConfig(started_grace=3600)).sweep() == 0
    assert disp.sweep() == 1
    assert queue.job_ids == [q.rq_job_id("job", jid, "Pending")]
    assert disp.sweep() == 0  # queued and in its queue: left alone


def test_a_finished_step_s_rq_job_expires_and_the_step_can_be_enqueued_again(store, redis, batch):
    """RQ deletes a job finished with ``result_ttl=0`` at once, looking up its registries and
    executions first: more round trips than the job's own run. One left to expire costs
    none, and a sweep that meets it (the step came back) removes it and enqueues afresh."""
    from rq import SimpleWorker

    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    tasks = q.Tasks(
        job_step="operator.add", batch_pending="operator.add", batch_report="operator.add"
    )
    disp = Dispatcher(store, redis, tasks)
    assert disp.sweep() == 1
    queue = Queue(job_queue_name("Pending"), connection=redis)
    SimpleWorker([queue], connection=redis).work(burst=True, logging_level="WARNING")
    key = f"rq:job:{q.rq_job_id('job', jid, 'Pending')}"
    assert 0 < redis.ttl(key) <= DispatcherConfig().finished_ttl
    assert disp.sweep() == 1  # the job is still Pending and unlocked: its step comes back
    assert queue.job_ids == [q.rq_job_id("job", jid, "Pending")]


def test_look_ahead_bounds_how_many_wait_per_state(store, redis, batch):
    for _ in range(8):
        store.new_jobs.create_job(batch, CONFIGURATION)
    disp = Dispatcher(store, redis, TASKS, DispatcherConfig(ahead=3))
    disp.sweep()
    assert Queue(job_queue_name("Pending"), connection=redis).count == 3


def test_the_look_ahead_grows_while_workers_empty_the_queue_and_shrinks_back(store, redis, batch):
    for _ in range(40):
        store.new_jobs.create_job(batch, CONFIGURATION)
    queue = Queue(job_queue_name("Pending"), connection=redis)
    disp = Dispatcher(store, redis, TASKS, DispatcherConfig(ahead=3, ahead_growth=4))
    grown = []
    for _ in range(4):
        disp.sweep()
        grown.append(queue.count)
        queue.empty()  # fast workers took everything before the next sweep
    assert grown == [3, 6, 12, 12]  # at most ahead_growth times ahead
    assert disp.sweep() == 12
    assert disp.sweep() == disp.sweep() == 0  # slow workers: everything still waiting
    for _ in range(10):
        queue.pop_job_id()
    assert disp.sweep() == 1  # back at the floor of 3 with 2 still waiting


def test_batches_pending_and_finished_are_enqueued(store, redis):
    pending = store.new_batches.create_batch(dict(SUBMISSION)).id
    done = store.new_batches.create_batch(dict(SUBMISSION)).id
    batch = store.batch_locks.begin_batch(done)
    jid = store.new_jobs.create_job(done, CONFIGURATION)
    store.batch_moves.start_processing(batch)
    store.moves.transition_job(jid, "Failed", "x")
    Dispatcher(store, redis, TASKS).sweep()
    assert [j.args for j in Queue(q.BATCH_PENDING_QUEUE, connection=redis).jobs] == [
        (pending, "Pending")
    ]
    assert [j.args for j in Queue(q.BATCH_REPORT_QUEUE, connection=redis).jobs] == [
        (done, "Processing")
    ]


def test_a_watch_wakes_the_dispatcher_when_a_job_arrives(store, redis, batch):
    disp = Dispatcher(store, redis, TASKS)
    disp.install_watches()
    disp.sweep_dirty()
    disp.wake.clear()
    store.new_jobs.create_job(batch, CONFIGURATION)
    assert disp.wake.wait(5), "no watch event for a new pending job"
    assert disp.sweep_dirty() == 1
    disp.stop.set()


def test_watches_alone_take_a_new_batch_from_pending_to_its_report(store, redis):
    """No full sweep after the first: the batch's move to Processing and its last job
    leaving must each wake the dispatcher (a full sweep comes only every 10 s)."""
    disp = Dispatcher(store, redis, TASKS)
    disp.install_watches()
    bid = store.new_batches.create_batch(dict(SUBMISSION)).id
    disp.sweep()
    assert [j.args for j in Queue(q.BATCH_PENDING_QUEUE, connection=redis).jobs] == [
        (bid, "Pending")
    ]
    batch = store.batch_locks.begin_batch(bid)
    jid = store.new_jobs.create_job(bid, CONFIGURATION)
    disp.wake.clear()
    store.batch_moves.start_processing(batch)
    assert disp.wake.wait(5), "no watch event for the batch's move to Processing"
    time.sleep(0.1)  # the job's own directory event may come as well
    disp.sweep_dirty()
    assert Queue(q.BATCH_REPORT_QUEUE, connection=redis).count == 0  # its job still runs
    store.moves.transition_job(jid, "Failed", "x")
    # The job's own state directory wakes the dispatcher too, maybe first: sweep what the
    # watches mark until the batch's mark has come (never a full sweep).
    deadline = time.monotonic() + 5
    while not Queue(q.BATCH_REPORT_QUEUE, connection=redis).count:
        assert time.monotonic() < deadline, "no watch event for the batch's last job leaving"
        disp.wake.wait(0.1)
        disp.wake.clear()
        disp.sweep_dirty()
    assert [j.args for j in Queue(q.BATCH_REPORT_QUEUE, connection=redis).jobs] == [
        (bid, "Processing")
    ]
    disp.stop.set()


def test_a_waiting_step_tells_why_without_moving_the_job(store, zk, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    before = store.jobs.get_job(jid)
    run_job_step(store, jid, "Pending", lambda job: Outcome.later("waiting for disk space", 1))
    job = store.jobs.get_job(jid)
    assert (job.status, job.message, job.locked) == ("Pending", "waiting for disk space", False)
    assert job.status_version == before.status_version + 1
    assert zk.get_children("/jobs/states/pending") == [f"05-{jid}"]


# --- carrying a job through several steps under one lock --------------------------------

WORK = ["Pending", "Estimating", "Provisioning", "Downloading", "Processing", "Storing"]
CHAIN = ChainPolicy(max_steps=8, max_seconds=60, may_enter=lambda status: True)


def recording_handlers(seen: list, store=None):
    """A handler per working state that notes the job as it got it and succeeds."""

    def handler(job):
        seen.append((job.status, job.locked, job.space_needed))
        if job.status == "Estimating":
            store.job_data.set_space_needed(job.jid, 4096)  # a data write mid-step, as handlers do
        return Outcome.success(f"{job.status} done")

    return {s: handler for s in [*WORK, "Recording", "Notify"]}


def test_a_chain_runs_every_step_under_one_lock_and_commits_each(store, zk, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    seen: list = []
    versions = []
    store.changes.listeners.append(lambda change: change.record and versions.append(change.record))
    report = run_job_steps(store, jid, "Pending", recording_handlers(seen, store), policy=CHAIN)
    assert report.result == StepResult.COMMITTED and report.steps == 8
    assert [s for s, _, _ in seen] == [*WORK, "Recording", "Notify"]
    assert all(locked for _, locked, _ in seen)
    # The step after the data write got the value written, not the one read before.
    assert seen[2] == ("Provisioning", True, 4096)
    job = store.jobs.get_job(jid)
    assert (job.status, job.locked, job.space_needed) == ("Completed", False, 4096)
    # One status write per step, each told to the listeners with its own version.
    assert [r.status for r in versions] == [*WORK[1:], "Recording", "Notify", "Completed"]
    assert [r.status_version for r in versions] == list(range(1, 9))
    assert [r.locked for r in versions] == [True] * 7 + [False]
    assert zk.get_children("/jobs/states/completed") == [f"05-{jid}"]


def test_a_chain_waits_for_its_commits_only(store, batch):
    """Each re-check between steps is read with the commit before it: the chain waits for
    its lock (the job is read with it) and one commit per step, nothing else."""
    first, jid = (
        store.new_jobs.create_job(batch, CONFIGURATION),
        store.new_jobs.create_job(batch, CONFIGURATION),
    )
    handlers = {
        status: (lambda job: Outcome.success()) for status in [*WORK, "Recording", "Notify"]
    }
    # The first job through makes the batch's directories of finished jobs (a mended commit).
    run_job_steps(store, first, "Pending", handlers, policy=CHAIN)
    before = store.stats["round_trips"]
    report = run_job_steps(store, jid, "Pending", handlers, policy=CHAIN)
    assert report.steps == 8
    assert store.stats["round_trips"] - before == 1 + 8


def test_a_chain_stops_before_a_state_the_worker_does_not_serve(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    seen: list = []
    policy = ChainPolicy(8, 60, may_enter=lambda status: status != "Downloading")
    report = run_job_steps(store, jid, "Pending", recording_handlers(seen, store), policy=policy)
    assert report.steps == 3 and [s for s, _, _ in seen] == WORK[:3]
    job = store.jobs.get_job(jid)
    assert (job.status, job.locked) == ("Downloading", False)


def test_a_chain_stops_at_its_step_budget_and_without_a_policy(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    seen: list = []
    policy = ChainPolicy(2, 60, may_enter=lambda status: True)
    report = run_job_steps(store, jid, "Pending", recording_handlers(seen, store), policy=policy)
    assert report.steps == 2
    assert store.jobs.get_job(jid).status == "Provisioning"
    handlers = recording_handlers(seen, store)
    assert run_job_steps(store, jid, "Provisioning", handlers).steps == 1
    job = store.jobs.get_job(jid)
    assert (job.status, job.locked) == ("Downloading", False)


def test_a_chain_stops_when_the_job_changes_between_steps(store, make_store, batch, monkeypatch):
    """A librarian's change that lands after a step's commit and before the re-check (the
    read ZooKeeper serves right after the commit) stops the chain before the next step."""
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    admin = make_store()
    engine = store.engine

    def commit_then_librarian(ops, what, path):
        results = engine.commit(ops, what)
        admin.moves.fail_job(jid, "stopped by a librarian")
        return results, store.reads.stat(path)

    monkeypatch.setattr(engine, "commit_and_stat", commit_then_librarian)
    seen: list = []
    report = run_job_steps(store, jid, "Pending", recording_handlers(seen, store), policy=CHAIN)
    assert report.result == StepResult.COMMITTED and report.steps == 1
    assert [s for s, _, _ in seen] == ["Pending"]
    job = store.jobs.get_job(jid)
    assert (job.status, job.message, job.locked) == ("Failed", "stopped by a librarian", False)


def test_a_chain_stops_when_the_queue_is_paused_mid_step(store, make_store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    admin = make_store()

    def pausing(job):
        admin.pause.pause_queue()
        # The worker learns of the pause by a watch: wait until it has.
        deadline = time.monotonic() + 10
        while not pause_flag(store.client).paused():
            assert time.monotonic() < deadline, "the pause never reached the worker"
            time.sleep(0.01)
        return Outcome.success()

    handlers = {"Pending": pausing, "Estimating": pytest.fail}
    report = run_job_steps(store, jid, "Pending", handlers, policy=CHAIN)
    assert report.steps == 1
    job = store.jobs.get_job(jid)
    assert (job.status, job.locked) == ("Estimating", False)
    assert run_job_steps(store, jid, "Estimating", handlers).result == StepResult.PAUSED
    admin.pause.unpause_queue()
    deadline = time.monotonic() + 10
    while pause_flag(store.client).paused():
        assert time.monotonic() < deadline, "the unpause never reached the worker"
        time.sleep(0.01)


def test_a_chain_that_must_wait_unlocks_in_the_state_it_reached(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    handlers = {
        "Pending": lambda job: Outcome.success(),
        "Estimating": lambda job: Outcome.later("short of disk", 5),
    }
    report = run_job_steps(store, jid, "Pending", handlers, policy=CHAIN)
    assert report.result == StepResult.DEFERRED and report.job.status == "Estimating"
    job = store.jobs.get_job(jid)
    assert (job.status, job.message, job.locked) == ("Estimating", "short of disk", False)


def test_a_failure_mid_chain_keeps_the_data_the_step_wrote(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    heard = []
    store.changes.listeners.append(lambda change: change.record and heard.append(change.record))

    def minting(job):
        store.job_data.save_job_data(jid, "identifiers", {"primary_id": "ark:/1/x", "local_id": []})
        return Outcome.fail("storage is down")

    handlers = {"Pending": lambda job: Outcome.success(), "Estimating": minting}
    run_job_steps(store, jid, "Pending", handlers, policy=CHAIN)
    assert heard[-1].status == "Failed"
    assert heard[-1].identifiers == {"primary_id": "ark:/1/x", "local_id": []}
    assert not store.jobs.get_job(jid).locked


def test_a_lock_taken_back_by_an_admin_ends_the_chain_without_touching_it(store, make_store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    other = make_store()

    def force_failed_and_relocked(change):
        if change.record is not None and change.record.status == "Estimating":
            other.moves.force_fail(jid, "stuck")
            other.edits.resume_job(jid)
            assert other.job_locks.lock_job(jid) is not None

    store.changes.listeners.append(force_failed_and_relocked)
    handlers = {s: (lambda job: Outcome.success()) for s in WORK}
    run_job_steps(store, jid, "Pending", handlers, policy=CHAIN)
    job = store.jobs.get_job(jid)
    assert job.status == "Estimating" and job.retry_count == 1
    assert job.locked, "the other worker's lock must stay"


@pytest.mark.parametrize(("steps", "seconds"), [(0, 30.0), (8, -1.0)])
def test_a_chain_budget_out_of_range_is_e011(settings, steps, seconds):
    settings.MQ_CHAIN_STEPS, settings.MQ_CHAIN_SECONDS = steps, seconds
    assert [m.id for m in checks.check_chain()] == ["mq.E011"]
    settings.MQ_CHAIN_STEPS, settings.MQ_CHAIN_SECONDS = 1, 0.0
    assert checks.check_chain() == []


def test_a_step_s_data_is_written_in_its_commit_and_only_if_it_commits(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    writes = store.stats["writes"]
    data = {"space_needed": 42, "store": {"version": 1}}
    report = run_job_step(store, jid, "Pending", lambda job: Outcome.success("ok", data=data))
    assert store.stats["writes"] - writes == 2  # the lock, then one multi
    job = store.jobs.get_job(jid)
    assert (job.status, job.space_needed, job.store) == ("Estimating", 42, {"version": 1})
    assert (report.job.space_needed, report.job.store) == (42, {"version": 1})
    store.job_data.set_priority(jid, 3)
    stale = report.job  # its status version is gone: the commit is refused, data and all
    with pytest.raises(ChangedUnderYou):
        store.moves.succeed_job(stale, data={"space_needed": 7})
    assert store.jobs.get_job(jid).space_needed == 42


def test_a_data_node_the_record_did_not_know_of_is_still_written(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    job = store.job_locks.lock_job(jid)
    store.job_data.save_job_data(jid, "inventory", None)  # there now, though the record says None
    done = store.moves.succeed_job(job, data={"inventory": {"mode": "add"}})
    assert done.status == "Estimating"
    assert store.jobs.get_job(jid).inventory == {"mode": "add"}


ARK = "ark:/99999/fk4lock"


def _locking_handler(store, then=lambda: None):
    """A step that takes the ARK's storage and inventory locks and hands them to its commit."""

    def handler(job):
        assert store.locks.lock_storage(ARK, owner=job.jid) and store.locks.lock_inventory(ARK)
        then()
        locks = (ItemLock("storage", ARK, owner=job.jid), ItemLock("inventory", ARK))
        return Outcome.success("stored", unlock=locks)

    return handler


def test_a_step_lets_go_of_its_item_locks_in_its_commit(store, zk, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    writes = store.stats["writes"]
    report = run_job_step(store, jid, "Pending", _locking_handler(store))
    assert report.result == StepResult.COMMITTED
    assert store.stats["writes"] - writes == 4  # job lock, the two item locks, one multi
    assert not zk.exists(ItemLock("storage", ARK).path)
    assert not zk.exists(ItemLock("inventory", ARK).path)


def test_a_refused_commit_still_lets_go_of_the_step_s_item_locks(store, make_store, zk, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    admin = make_store()
    report = run_job_step(
        store,
        jid,
        "Pending",
        _locking_handler(store, then=lambda: admin.job_data.set_priority(jid, 2)),
    )
    assert report.result == StepResult.ABANDONED
    assert store.jobs.get_job(jid).status == "Pending"
    assert not zk.exists(ItemLock("storage", ARK).path)
    assert not zk.exists(ItemLock("inventory", ARK).path)


def test_the_project_names_tasks_that_exist():
    for path in (TASKS.job_step, TASKS.batch_pending, TASKS.batch_report):
        assert callable(import_attribute(path)), path
