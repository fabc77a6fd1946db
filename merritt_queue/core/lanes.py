"""The express lane: small or urgent jobs have queues of their own, so they never wait for a
worker held by a long download.

Every state has two RQ queues: ``mq-job-<state>`` (the normal lane) and
``mq-express-<state>`` (the express lane). A job's step goes to the express lane when the
job is urgent (its priority at or below ``urgent_priority``, a lower number being served
first) or small (its ``space_needed`` under ``small_bytes``, which Estimating writes: so
only from Provisioning on). Every worker serves the express queues before the normal ones;
a reserved worker (``queues.reserved_queue_names``) serves the express queues, the
batches' queues, and of the normal lane only the steps whose length does not grow with a
job's bytes (``RESERVED_NORMAL_STATES``): never a large job's Downloading, Processing or
Storing. A small job's Pending and Estimating, before its size is known, are such steps.

The dispatcher, the hand-over and a worker's chain of steps ask the same ``LaneRule`` of the
same job data (priority, ``space_needed``), so they agree on each step's lane; the RQ job id
is the same in both lanes, so a disagreement (a priority changed meanwhile) never enqueues a
step twice: it only leaves the step in the lane it was first put in.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from . import tree as t
from .states import JobStatus
from .store import QueueStore

JOB_QUEUE_PREFIX = "mq-job-"
EXPRESS_QUEUE_PREFIX = "mq-express-"
# The states whose queues see a job's size: Estimating writes ``space_needed``.
SIZED_STATES = frozenset(
    {
        JobStatus.PROVISIONING,
        JobStatus.DOWNLOADING,
        JobStatus.PROCESSING,
        JobStatus.STORING,
        JobStatus.RECORDING,
        JobStatus.NOTIFY,
    }
)
# The normal lane's states a reserved worker takes too, so that it is not idle while no small
# job waits: steps about as long for a big job as for a small one. Downloading, Processing
# (which reads every file) and Storing grow with the bytes.
RESERVED_NORMAL_STATES = (
    JobStatus.NOTIFY,
    JobStatus.RECORDING,
    JobStatus.PROVISIONING,
    JobStatus.ESTIMATING,
    JobStatus.PENDING,
)
# The space_needed values ``Lanes`` remembers, at most: forgotten all at once beyond that.
CACHE_MAX = 200_000


def job_queue_name(status: str) -> str:
    return f"{JOB_QUEUE_PREFIX}{status.lower()}"


def express_queue_name(status: str) -> str:
    return f"{EXPRESS_QUEUE_PREFIX}{status.lower()}"


def is_reserved(queues: Collection[str]) -> bool:
    """Whether a worker serving ``queues`` is a reserved one: it serves the express lane
    and not the normal lane's Downloading."""
    return job_queue_name(JobStatus.DOWNLOADING) not in queues and any(
        q.startswith(EXPRESS_QUEUE_PREFIX) for q in queues
    )


@dataclass(frozen=True)
class LaneRule:
    """Which jobs are urgent or small (``MQ_URGENT_PRIORITY``, ``MQ_SMALL_JOB_BYTES``).

    ``small_bytes`` 0 makes no job small; ``urgent_priority`` -1 makes none urgent.
    """

    small_bytes: int = 50_000_000
    urgent_priority: int = 0

    def express(self, status: str, priority: int, space_needed: int | None) -> bool:
        """``space_needed`` None: not known (no node), which is never taken as small."""
        if priority <= self.urgent_priority:
            return True
        return (
            status in SIZED_STATES and space_needed is not None and space_needed < self.small_bytes
        )

    def queue_name(self, status: str, priority: int, space_needed: int | None) -> str:
        if self.express(status, priority, space_needed):
            return express_queue_name(status)
        return job_queue_name(status)

    def needs_size(self, status: str, priority: int) -> bool:
        """Whether the lane of a job of this priority depends on its ``space_needed``."""
        return status in SIZED_STATES and priority > self.urgent_priority


@dataclass
class Lanes:
    """The lane of listed jobs, for the dispatcher: each job's ``space_needed`` read once per
    state it is listed in (it changes only while a step holds the job's lock)."""

    rule: LaneRule
    _space: dict[tuple[str, str], int | None] = field(default_factory=dict)

    def express(
        self, store: QueueStore, status: str, entries: Sequence[tuple[str, int]]
    ) -> list[bool]:
        """Whether each ``(jid, priority)`` of ``status`` goes to the express lane."""
        missing = [
            jid
            for jid, priority in entries
            if self.rule.needs_size(status, priority) and (jid, status) not in self._space
        ]
        if missing:
            if len(self._space) > CACHE_MAX:
                self._space = {}
            read = store.jobs.job_node_values(missing, "space_needed", decode=t.decode_int)
            self._space.update({(jid, status): read.get(jid) for jid in missing})
        return [
            self.rule.express(status, priority, self._space.get((jid, status)))
            for jid, priority in entries
        ]
