"""The express lane on a real ZooKeeper and Redis: the dispatcher, the hand-over and a chain of
steps agree on each job's lane, and a flush of Redis rebuilds both lanes."""

from __future__ import annotations

import uuid

import pytest
from rq import Queue

from merritt_queue.core import handover
from merritt_queue.core.dispatcher import Dispatcher, DispatcherConfig
from merritt_queue.core.lanes import LaneRule
from merritt_queue.core.runner import ChainPolicy, Outcome, run_job_step, run_job_steps
from merritt_queue.project.tasks import TASKS

SUBMISSION = {"type": "file", "payload_url": "http://example.org/a.txt"}
CONFIGURATION = {"payload_url": "http://example.org/a.txt", "payload_type": "file"}
RULE = LaneRule(small_bytes=1000, urgent_priority=0)
BIG = 10**9


@pytest.fixture
def batch(store) -> str:
    bid = store.new_batches.create_batch(SUBMISSION | {"batchID": str(uuid.uuid4())}).id
    store.batch_locks.unlock_batch(store.batch_locks.acquire_pending_batch())
    return bid


def sized(store, batch: str, space: int, priority: int = 5) -> str:
    """A job moved on to Downloading, Estimating having found it needs ``space`` bytes."""
    jid = store.new_jobs.create_job(batch, CONFIGURATION, priority=priority)
    run_job_step(store, jid, "Pending", lambda job: Outcome.success("begun"))
    run_job_step(
        store, jid, "Estimating", lambda job: Outcome.success("sized", data={"space_needed": space})
    )
    run_job_step(store, jid, "Provisioning", lambda job: Outcome.success("room"))
    assert store.jobs.get_job(jid).status == "Downloading"
    return jid


def queued(redis, name: str) -> list[str]:
    return [job.args[0] for job in Queue(name, connection=redis).jobs]


def test_the_sweep_puts_each_step_in_its_jobs_lane_and_rebuilds_both_after_a_flush(
    store, redis, batch
):
    small = sized(store, batch, 10)
    big = sized(store, batch, BIG)
    urgent = store.new_jobs.create_job(batch, CONFIGURATION, priority=0)
    waiting = store.new_jobs.create_job(batch, CONFIGURATION, priority=5)
    disp = Dispatcher(store, redis, TASKS, DispatcherConfig(lanes=RULE))
    for _ in range(2):  # a flush of Redis: the next sweep puts everything back where it was
        assert disp.sweep() == 4
        assert queued(redis, "mq-express-downloading") == [small]
        assert queued(redis, "mq-job-downloading") == [big]
        assert queued(redis, "mq-express-pending") == [urgent]
        assert queued(redis, "mq-job-pending") == [waiting]
        assert disp.sweep() == 0, "a second sweep must not enqueue duplicates"
        redis.flushdb()


def test_a_full_normal_lane_does_not_keep_a_small_job_out_of_the_express_lane(store, redis, batch):
    bigs = [sized(store, batch, BIG) for _ in range(4)]
    small = sized(store, batch, 10)  # listed after every big one: same priority, later id
    disp = Dispatcher(store, redis, TASKS, DispatcherConfig(ahead=2, lanes=RULE))
    assert disp.sweep_job_state("Downloading") == 3
    assert queued(redis, "mq-job-downloading") == bigs[:2]
    assert queued(redis, "mq-express-downloading") == [small]


def test_the_handover_puts_a_small_batchs_new_jobs_in_their_lanes(store, redis, batch):
    urgent = store.new_jobs.create_job(batch, CONFIGURATION, priority=0)
    normal = store.new_jobs.create_job(batch, CONFIGURATION, priority=5)
    assert handover.new_jobs(store, redis, TASKS, batch, RULE) == 2
    assert queued(redis, "mq-express-pending") == [urgent]
    assert queued(redis, "mq-job-pending") == [normal]
    # The dispatcher agrees: the same RQ job ids, nothing enqueued twice.
    assert Dispatcher(store, redis, TASKS, DispatcherConfig(lanes=RULE)).sweep() == 0


def test_a_chain_decides_the_next_lane_by_the_size_its_step_just_found(store, batch):
    jid = store.new_jobs.create_job(batch, CONFIGURATION)
    asked = []

    def enters(job, status) -> bool:
        asked.append((status, RULE.queue_name(status, job.priority, job.space_needed)))
        return status != "Downloading" or RULE.express(status, job.priority, job.space_needed)

    handlers = {
        "Pending": lambda job: Outcome.success("begun"),
        "Estimating": lambda job: Outcome.success("sized", data={"space_needed": BIG}),
        "Provisioning": lambda job: Outcome.success("room"),
        "Downloading": lambda job: Outcome.success("fetched"),
    }
    policy = ChainPolicy(max_steps=8, max_seconds=60, may_enter=lambda s: True, enters=enters)
    run_job_steps(store, jid, "Pending", handlers, policy=policy)
    assert asked == [
        ("Estimating", "mq-job-estimating"),
        ("Provisioning", "mq-job-provisioning"),
        ("Downloading", "mq-job-downloading"),
    ]
    job = store.jobs.get_job(jid)
    assert (job.status, job.locked) == ("Downloading", False)


def test_a_small_jobs_download_takes_one_slot_beyond_a_hosts_limit_and_no_more(redis):
    """A host busy with long downloads still serves a small deposit (``pipeline.download``)."""
    from merritt_queue.services.hostslots import HostFull, HostSlots

    slots = HostSlots(redis, limit=2, ttl=30.0)
    held = [slots.hold(["example.org"]) for _ in range(2)]
    with pytest.raises(HostFull):
        slots.hold(["example.org"])
    small = slots.hold(["example.org"], extra=1)
    with pytest.raises(HostFull):
        slots.hold(["example.org"], extra=1)
    for lease in [*held, small]:
        lease.release()
