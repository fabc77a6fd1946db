"""A worker hands the next piece of work straight to RQ after its commit.

The dispatcher hears of each change through a watch and sweeps at most once per ``settle``:
on a busy queue that coalescing saves more than it costs, but a small deposit pays for it at
each hand-over that only the dispatcher makes (a new batch's jobs, a finished batch's
report). A worker that has just made such a change knows what comes next, and enqueues it
under the same deterministic RQ job id the dispatcher would use: whichever of the two comes
second finds the id taken and leaves it. The dispatcher stays the safety net (a lost
hand-over is enqueued by the next sweep), and the task re-checks everything under the
item's lock, as it does for the dispatcher's enqueues.
"""

from __future__ import annotations

import logging

from kazoo.exceptions import KazooException
from redis import Redis
from redis.exceptions import RedisError
from rq import Queue
from rq.exceptions import DuplicateJobError

from . import tree as t
from .lanes import LaneRule
from .pauseflag import pause_flag
from .queues import (
    BATCH_PENDING_QUEUE,
    BATCH_REPORT_QUEUE,
    DispatcherConfig,
    Tasks,
    is_deferred,
    rq_job_id,
)
from .reasons import describe
from .records import DEFAULT_PRIORITY
from .states import BatchStatus, JobStatus
from .store import QueueStore
from .sweeps import REPORT_STATES

log = logging.getLogger(__name__)

# A batch of at most this many jobs has them handed to RQ at once, ahead of what waits: the
# batches the planner already serves first (``planning.batch_priority``).
SMALL_BATCH_JOBS = 10
FINAL_JOB_STATES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED})
# RQ's job timeout, finished and failure TTLs as the dispatcher sets them.
_AS_DISPATCHED = DispatcherConfig()


def new_batch(store: QueueStore, redis: Redis, tasks: Tasks, bid: str) -> bool:
    """Enqueue a batch just submitted, to be turned into jobs."""
    try:
        if pause_flag(store.client).paused():
            return False
        queue = Queue(BATCH_PENDING_QUEUE, connection=redis)
        return _enqueue(queue, tasks.batch_pending, (bid, BatchStatus.PENDING), kind="batch")
    except (KazooException, RedisError, OSError) as e:
        log.info("batch %s: left to the dispatcher: %s", bid, describe(e))
        return False


def new_jobs(
    store: QueueStore, redis: Redis, tasks: Tasks, bid: str, lanes: LaneRule | None = None
) -> int:
    """Enqueue the Pending jobs of a small batch just turned into jobs; how many.

    Each goes to its lane's queue (``lanes``), as the dispatcher would put it."""
    try:
        if pause_flag(store.client).paused():
            return 0
        jids = store.batches.batch_jobs(bid).get("batch-processing", [])
        if not 0 < len(jids) <= SMALL_BATCH_JOBS:
            return 0
        rule = lanes or _AS_DISPATCHED.lanes
        priority = store.jobs.job_node_values(jids, "priority", decode=t.decode_int)
        queues: dict[str, Queue] = {}
        count = 0
        # At the front, the first job last so that it is served first.
        for jid in reversed(jids):
            known = priority.get(jid)
            name = rule.queue_name(
                JobStatus.PENDING, DEFAULT_PRIORITY if known is None else known, 0
            )
            queue = queues.setdefault(name, Queue(name, connection=redis))
            count += _enqueue(queue, tasks.job_step, (jid, JobStatus.PENDING), at_front=True)
        return count
    except (KazooException, RedisError, OSError) as e:
        log.info("batch %s: jobs left to the dispatcher: %s", bid, describe(e))
        return 0


def batch_report(store: QueueStore, redis: Redis, tasks: Tasks, bid: str, job_status: str) -> bool:
    """Enqueue the report of the batch whose job just ended, if that was its last job."""
    if job_status not in FINAL_JOB_STATES:
        return False
    try:
        if pause_flag(store.client).paused():
            return False
        status = store.batches.finished_batch_status(bid)
        if status not in REPORT_STATES:
            return False
        queue = Queue(BATCH_REPORT_QUEUE, connection=redis)
        return _enqueue(queue, tasks.batch_report, (bid, status), kind="batch")
    except (KazooException, RedisError, OSError) as e:
        log.info("batch %s: report left to the dispatcher: %s", bid, describe(e))
        return False


def _enqueue(queue: Queue, func: str, args: tuple, *, kind: str = "job", at_front=False) -> bool:
    job_id = rq_job_id(kind, *args)
    if is_deferred(queue.connection, job_id):
        return False
    try:
        queue.enqueue_call(
            func,
            args=args,
            job_id=job_id,
            timeout=_AS_DISPATCHED.job_timeout,
            result_ttl=_AS_DISPATCHED.finished_ttl,
            failure_ttl=_AS_DISPATCHED.failure_ttl,
            unique=True,
            at_front=at_front,
        )
    except DuplicateJobError:  # the dispatcher was first, or the item's step already runs
        return False
    return True
