"""The Workers page's rows: each worker process as it reports itself (``workerfacts``), the
job each one holds as ZooKeeper has it now, and the dispatcher's and reconciler's health.

Guarantees: a fixed number of reads whatever the queue holds (four Redis round trips: the
workers, then the oldest queued step; one pipelined ZooKeeper round for the jobs the workers
hold; one query of the mirror, and one more for a reader of some collections only);
a job outside the person's collections is shown as such, never by id; Redis or ZooKeeper
away is said on the page, never an error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

import django_rq
from django.conf import settings
from django.utils import timezone
from redis.exceptions import RedisError

from jobs.models import Job, MirrorState
from merritt_queue.core import workerfacts
from merritt_queue.core.errors import QueueError
from merritt_queue.core.queues import all_queue_names
from merritt_queue.core.worker import DRAINED
from merritt_queue.project.runtime import get_store
from merritt_queue.project.zkdeadline import UNREACHABLE
from ui.reading_scope import readable_rows, reads_everything

from . import reserved as reserved_workers

log = logging.getLogger(__name__)

# What a worker is doing, as the page says it.
BUSY, IDLE, DRAINING, SILENT, GONE = "busy", "idle", "draining", "silent", "gone"


@dataclass
class JobNow:
    """The job a worker held, as ZooKeeper has it now."""

    jid: str
    readable: bool
    status: str = ""
    locked: bool = False
    by: str = ""  # another worker running it now
    error: str = ""


@dataclass
class WorkerRow:
    name: str
    host: str
    pid: int
    queues: list[str]
    state: str
    heartbeat: datetime | None
    silent_for: float  # seconds since its last word
    started: datetime | None
    jid: str = ""
    step: str = ""
    since: datetime | None = None
    bytes: int | None = None
    done_today: int = 0
    failed_today: int = 0
    drain: dict = field(default_factory=dict)
    job: JobNow | None = None

    @property
    def drained(self) -> bool:
        return bool(self.drain)

    @property
    def heartbeat_ago(self) -> str:
        return ago(self.heartbeat)

    @property
    def since_ago(self) -> str:
        return ago(self.since)

    @property
    def reserved(self) -> bool:
        return reserved_workers.queues_text(self.queues) is not None

    @property
    def queues_text(self) -> str:
        if set(self.queues) == set(all_queue_names()):
            return "every queue"
        if text := reserved_workers.queues_text(self.queues):
            return text
        return ", ".join(self.queues) or "—"

    @property
    def fate(self) -> str:
        """What became of the job of a worker gone silent, in words."""
        job = self.job
        if self.state not in (SILENT, GONE) or job is None or not job.readable:
            return ""
        if job.error:
            return f"its job cannot be read now: {job.error}"
        if job.status == self.step and job.locked and not job.by:
            return (
                "its job still holds its lock: the worker's ZooKeeper session has not ended "
                "(the process may be stopped, not dead); once it ends the lock vanishes and "
                "the job runs again on another worker"
            )
        if job.by:
            return f"its lock vanished with its session; the job is {job.status} on worker {job.by}"
        return f"its lock vanished with its session; the job is now {job.status}"


@dataclass
class Health:
    dispatcher: dict | None
    dispatcher_age: float | None
    dispatcher_late: bool
    reconciled: datetime | None  # the last full reconcile
    reconcile_late: bool
    followed: datetime | None  # the last change the follower applied
    sweep_seconds: float
    reconcile_seconds: float
    # The queue whose first step has waited longest for a worker, and since when.
    waiting: tuple[str, datetime] | None = None
    reserved: reserved_workers.ReservedCount | None = None

    @property
    def waiting_ago(self) -> str:
        return ago(self.waiting[1]) if self.waiting else ""

    @property
    def reconciled_ago(self) -> str:
        return ago(self.reconciled)

    @property
    def followed_ago(self) -> str:
        return ago(self.followed)


@dataclass
class Board:
    rows: list[WorkerRow]
    health: Health | None
    error: str = ""


def board(user) -> Board:
    now = timezone.now()
    redis = django_rq.get_connection("default")
    try:
        facts = workerfacts.read(redis)
        oldest = workerfacts.oldest_waiting(redis, all_queue_names())
    except RedisError as e:
        log.warning("workers page: Redis does not answer: %s", e)
        return Board([], _health(None, now), f"Redis does not answer ({e}): no worker is shown")
    rows = [_row(name, facts, now) for name in _names(facts)]
    _jobs(rows, user)
    rows.sort(key=lambda r: (r.state in (SILENT, GONE), r.host, r.name))
    health = _health(facts.dispatcher, now)
    health.reserved = reserved_workers.count(rows)
    if oldest:
        health.waiting = (oldest[0], _stamp(oldest[1]) or now)
    return Board(rows, health)


def _names(facts: workerfacts.Facts) -> list[str]:
    return sorted(set(facts.registered) | set(facts.records))


def _row(name: str, facts: workerfacts.Facts, now: datetime) -> WorkerRow:
    rq = facts.registered.get(name, {})
    rec = facts.records.get(name) or workerfacts.Record(name)
    beats = [b for b in (_when(rq.get("last_heartbeat")), _stamp(rec.beat)) if b]
    heartbeat = max(beats) if beats else None
    silent_for = (now - heartbeat).total_seconds() if heartbeat else float("inf")
    row = WorkerRow(
        name=name,
        host=rec.host or rq.get("hostname", ""),
        pid=rec.pid or int(rq.get("pid") or 0),
        queues=rec.queues or [q for q in rq.get("queues", "").split(",") if q],
        state=IDLE,
        heartbeat=heartbeat,
        silent_for=silent_for,
        started=_when(rq.get("birth")),
        jid=rec.jid,
        step=rec.step,
        since=_stamp(rec.since),
        bytes=rec.so_far,
        done_today=facts.day.get(f"{name}:done", 0),
        failed_today=facts.day.get(f"{name}:failed", 0),
        drain=facts.drains.get(name, {}),
    )
    row.state = _state(row, registered=bool(rq), rq_state=rq.get("state", ""))
    return row


def _state(row: WorkerRow, *, registered: bool, rq_state: str) -> str:
    if not registered:
        return GONE
    if row.silent_for > settings.MQ_WORKER_SILENT_SECONDS:
        return SILENT
    if row.drained:
        return DRAINING if row.jid else DRAINED
    return BUSY if row.jid or rq_state == "busy" else IDLE


def _jobs(rows: list[WorkerRow], user) -> None:
    """The held jobs as ZooKeeper has them now, each shown only to who may read it."""
    jids = sorted({r.jid for r in rows if r.jid})
    if not jids:
        return
    readable = set(jids)
    if not reads_everything(user):
        rows_read = readable_rows(user, Job.objects.filter(jid__in=jids))
        readable = set(rows_read.values_list("jid", flat=True))
    running = {r.jid: r.name for r in rows if r.jid and r.state in (BUSY, DRAINING)}
    try:
        heads = get_store(init=False).jobs.job_heads(jids)
    except UNREACHABLE as e:
        heads = dict.fromkeys(jids, QueueError(f"ZooKeeper does not answer ({e})"))
    for row in rows:
        if not row.jid:
            continue
        head = heads.get(row.jid)
        job = JobNow(row.jid, row.jid in readable)
        if isinstance(head, QueueError):
            job.error = str(head)
        elif head is not None:
            job.status, job.locked = head.status, head.locked
        other = running.get(row.jid, "")
        job.by = other if other != row.name else ""
        row.job = job


def _health(dispatcher: dict | None, now: datetime) -> Health:
    states = dict(MirrorState.objects.filter(name__in=["full", "watch"]).values_list("name", "at"))
    at = _stamp(dispatcher["at"]) if dispatcher else None
    age = (now - at).total_seconds() if at else None
    sweep, reconcile = settings.MQ_SWEEP_SECONDS, settings.MQ_RECONCILE_SECONDS
    full = states.get("full")
    return Health(
        dispatcher=dispatcher,
        dispatcher_age=age,
        # Late after three sweeps missed (one can be long: a big queue, a slow ZooKeeper).
        dispatcher_late=age is None or age > 3 * sweep + 30,
        reconciled=full,
        reconcile_late=full is None or (now - full).total_seconds() > 2 * reconcile + 60,
        followed=states.get("watch"),
        sweep_seconds=sweep,
        reconcile_seconds=reconcile,
    )


def ago(moment: datetime | None) -> str:
    """How long ago, in seconds while that is short: a heartbeat is a matter of seconds."""
    if moment is None:
        return ""
    seconds = max(0, int((timezone.now() - moment).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _stamp(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds else None


def _when(text: str | None) -> datetime | None:
    """RQ's times, written by ``rq.utils.utcformat``."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
