"""What RQ holds and how it is put there: every queue's name and the order workers serve them,
one RQ job id per (item, state), the deferrals the sweep honours, and the enqueue itself.

Guarantees:

- Deduplicated: one RQ job per (item, state), by a deterministic job id that
  is created atomically (``unique``), so two dispatchers never double-enqueue.
  The dispatcher, the hand-over (``handover``) and the tasks name an item's step alike.
- Redis holds nothing that cannot be rebuilt: after a flush or restart the
  next sweep enqueues everything again from ZooKeeper.
- A finished or dead RQ job never blocks its id: the next enqueue of the same step removes
  it; one queued or running is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from redis import Redis
from rq import Queue
from rq.exceptions import DuplicateJobError, NoSuchJobError
from rq.job import Job
from rq.job import JobStatus as RQStatus

from .lanes import RESERVED_NORMAL_STATES, LaneRule, express_queue_name, job_queue_name
from .sides import ALL
from .states import JobStatus

JOB_WORK_STATES: tuple[str, ...] = (
    JobStatus.PENDING,
    JobStatus.ESTIMATING,
    JobStatus.PROVISIONING,
    JobStatus.DOWNLOADING,
    JobStatus.PROCESSING,
    JobStatus.STORING,
    JobStatus.RECORDING,
    JobStatus.NOTIFY,
)
BATCH_PENDING_QUEUE = "mq-batch-pending"
# Bulk admin actions, which the project enqueues itself: served before everything else.
ADMIN_QUEUE = "mq-admin"
BATCH_REPORT_QUEUE = "mq-batch-reporting"
# Depositors' notifications (the project's notifications app enqueues them itself): served
# last, so that a slow receiver never holds the pipeline's work.
NOTIFY_QUEUE = "mq-notify"
# How long a batch a handler found to be Merritt's is left alone by the sweep.
LEAVE_SECONDS = 3600.0
_QUEUED = {RQStatus.QUEUED, RQStatus.SCHEDULED, RQStatus.DEFERRED, RQStatus.CREATED}


def all_queue_names() -> list[str]:
    """Every queue, in the order a worker should serve them: the end of the pipeline first.

    RQ serves the first non-empty queue it is given; draining later states first
    finishes work already started before taking new work, instead of moving the
    whole backlog through the states in waves. Admin work (a bulk action a person
    is waiting on) comes before all of it.

    A Pending batch comes just before Pending jobs: last, a new batch would wait until
    every job queue is empty, which a big batch in flight keeps from happening; here
    it waits only for the next job to start, and its jobs then queue by priority.
    Notifications come after all the pipeline's work: a site that wants them prompt under a
    steady load gives ``mq-notify`` a worker of its own.

    The express lane (``lanes``: small or urgent jobs) comes before the normal lane's job
    queues: a worker that finishes a step takes a small job's next step first.
    """
    later_first = [job_queue_name(s) for s in reversed(JOB_WORK_STATES)]
    return [
        ADMIN_QUEUE,
        BATCH_REPORT_QUEUE,
        *express_queue_names(),
        *later_first[:-1],
        BATCH_PENDING_QUEUE,
        later_first[-1],
        NOTIFY_QUEUE,
    ]


def express_queue_names() -> list[str]:
    return [express_queue_name(s) for s in reversed(JOB_WORK_STATES)]


def reserved_queue_names() -> list[str]:
    """The queues of a reserved worker, in serving order: the express lane, the batches'
    queues (a small deposit's batch is turned into jobs and reported there) and the normal
    lane's steps whose length does not grow with a job's bytes (``lanes``). Never a large
    job's Downloading, so a small job always finds a worker; admin actions and depositors'
    notifications are left to the other workers."""
    normal = [job_queue_name(s) for s in RESERVED_NORMAL_STATES]
    return [BATCH_REPORT_QUEUE, *express_queue_names(), BATCH_PENDING_QUEUE, *normal]


def rq_job_id(kind: str, item_id: str, status: str) -> str:
    return f"mq-{kind}-{item_id}-{status.lower()}"


def _later_key(job_id: str) -> str:
    return f"mq:later:{job_id}"


def is_deferred(redis: Redis, job_id: str) -> bool:
    return bool(redis.exists(_later_key(job_id)))


def defer(redis: Redis, job_id: str, seconds: float) -> None:
    """Keep the sweep from re-enqueueing a step that asked to wait (e.g. short of disk)."""
    redis.set(_later_key(job_id), b"1", px=max(1, int(seconds * 1000)))


@dataclass(frozen=True)
class Tasks:
    """The RQ tasks the dispatcher enqueues, by dotted path, as the project names them: the
    core runs steps but knows no app (``merritt_queue.project.tasks`` has the project's).

    Each is called with ``(item id, status)``.
    """

    job_step: str
    batch_pending: str
    batch_report: str


@dataclass
class DispatcherConfig:
    ahead: int = 20  # queued RQ jobs per state beyond which nothing more is enqueued
    # ... up to this many times ``ahead`` while the workers empty a state's queue between
    # two sweeps: with fast steps a fixed look-ahead caps the rate at ``ahead / settle``.
    ahead_growth: int = 8
    sweep_interval: float = 10.0
    started_grace: float = 60.0  # an RQ job "started" this long with no ZK lock is dead
    # Watch events that come within this many seconds make one sweep. Under load every
    # step moves a job between directories; one sweep per event costs more than the steps.
    settle: float = 0.25
    job_timeout: int = 3600
    failure_ttl: int = 86400
    # How long a step's RQ job stays once finished. RQ deletes one finished with
    # ``result_ttl=0`` at once, after looking up its status, registries and executions:
    # more round trips than running it took. One left to expire costs nothing more; a sweep
    # that meets it (the same step come back) removes it first (``_clear_finished``).
    finished_ttl: int = 60
    workers: str = ALL  # what this site's workers take: sides.WORKER_MODES
    # Which jobs' steps go to the express lane (``lanes``).
    lanes: LaneRule = field(default_factory=LaneRule)
    tick_interval: float = 30.0  # longest time between two calls of the ``on_tick`` hook


class Enqueuer:
    """Puts one RQ job per id into a queue, with the dispatcher's timeout and TTLs."""

    def __init__(self, redis: Redis, config: DispatcherConfig):
        self.redis = redis
        self.config = config
        self.enqueued = 0

    def enqueue(
        self, queue: Queue, func: str, args: tuple, job_id: str, *, at_front: bool = False
    ) -> bool:
        for _ in range(2):
            try:
                queue.enqueue_call(
                    func,
                    args=args,
                    job_id=job_id,
                    at_front=at_front,
                    timeout=self.config.job_timeout,
                    result_ttl=self.config.finished_ttl,
                    failure_ttl=self.config.failure_ttl,
                    unique=True,
                )
            except DuplicateJobError:
                # An RQ job of this id exists: queued or running (leave it), or a failed or
                # dead one (remove it and enqueue afresh).
                if not self._clear_finished(job_id):
                    return False
                continue
            self.enqueued += 1
            return True
        return False

    def _clear_finished(self, job_id: str) -> bool:
        """Remove a finished or dead RQ job of this id; False while it is queued or running."""
        try:
            job = Job.fetch(job_id, connection=self.redis)
        except NoSuchJobError:
            return True
        status = job.get_status(refresh=False)
        if status == RQStatus.QUEUED and self._lost_in_dequeue(job):
            job.delete()
            return True
        if status in _QUEUED:
            return False
        if status == RQStatus.STARTED and job.started_at:
            age = (datetime.now(UTC) - _aware(job.started_at)).total_seconds()
            if age < self.config.started_grace:
                return False
        job.delete()
        return True

    def _lost_in_dequeue(self, job: Job) -> bool:
        """Whether a job marked queued is in no queue any more, for longer than the grace.

        A worker stopped between taking a job off its queue and marking it started
        (RQ raises StopRequested from the signal handler) leaves it so; left alone, its
        item would never be enqueued again. Running a step twice is harmless: the
        worker re-checks the item under its lock.
        """
        enqueued = job.enqueued_at
        if enqueued is None:
            return False
        if (datetime.now(UTC) - _aware(enqueued)).total_seconds() < self.config.started_grace:
            return False
        return Queue(job.origin, connection=self.redis).get_job_position(job.id) is None


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
