"""Turns the ZooKeeper tree into RQ work: watches for speed, a periodic sweep for safety.

Guarantees:

- At least once: every job in a working state and every batch with work to
  do is enqueued again until its step commits. A duplicate is harmless: the
  task re-checks status and lock under the lock before doing anything.
- Deduplicated: one RQ job per (item, state), by a deterministic job id that
  is created atomically (``unique``), so two dispatchers never double-enqueue.
- Redis holds nothing that cannot be rebuilt: after a flush or restart the
  next sweep enqueues everything again from ZooKeeper.
- While ``/locks/queue/ingest`` exists nothing new is enqueued; steps already
  running finish.
- Only what this site's workers may run (``sides``, the ``workers`` mode): a batch or job
  left to Merritt's own ingest is never enqueued; in mode ``none`` nothing is.
- Priority: each state queue is filled in ``PP-JID`` order and only a few
  items ahead, so a later high-priority job is not stuck behind a backlog. New
  work (Pending) is shared: within a priority, batches take turns (``fairness``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch
from redis import Redis
from redis.exceptions import RedisError
from rq import Queue
from rq.exceptions import DuplicateJobError, NoSuchJobError
from rq.job import Job
from rq.job import JobStatus as RQStatus

from . import tree as t
from . import workerfacts
from .errors import QueueError
from .fairness import Turns
from .history import DISPATCHER_PREFIX, process_actor
from .lanes import RESERVED_NORMAL_STATES, LaneRule, Lanes, express_queue_name, job_queue_name
from .pauseflag import pause_flag
from .reasons import describe
from .sides import ALL, NONE, reports_batch, runs_batch, runs_job
from .states import BatchStatus, JobStatus
from .store import QueueStore

log = logging.getLogger(__name__)

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
# Batches the reporting task picks up: the ones whose jobs are all finished.
REPORT_STATES = (BatchStatus.PROCESSING, BatchStatus.REPORTING, BatchStatus.UPDATE_REPORTING)
# How long a batch a handler found to be Merritt's is left alone by the sweep.
LEAVE_SECONDS = 3600.0
# The decisions ``_runnable`` remembers, at most: forgotten all at once beyond that.
RUNS_CACHE_MAX = 200_000
# Entries looked through for small jobs past a full normal lane, at most, per sweep of a state.
EXPRESS_SCAN = 2000
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


@dataclass
class _Fill:
    """One lane's RQ queue of a state, as a sweep fills it: ``budget`` RQ jobs at most."""

    queue: Queue
    queued: set[str]
    budget: int
    last_served: int | None = None
    count: int = 0
    ahead: list[tuple[str, str]] = field(default_factory=list)
    backlog: bool = False  # work left behind for want of room

    @property
    def full(self) -> bool:
        return len(self.queued) + self.count + len(self.ahead) >= self.budget


class Dispatcher:
    """Watches the tree and keeps the RQ queues filled from it."""

    def __init__(
        self,
        store: QueueStore,
        redis: Redis,
        tasks: Tasks,
        config: DispatcherConfig | None = None,
        on_tick: Callable[[], float | None] | None = None,
    ):
        self.store = store
        # The project's periodic work (maintenance windows, resume runs, due notifications),
        # called at start-up and at least every ``tick_interval``; it answers how soon it
        # wants to be called again.
        self.on_tick = on_tick
        if not store.changes.actor:  # a store shared with other writers keeps theirs
            store.changes.default_actor = process_actor(DISPATCHER_PREFIX)
        self.redis = redis
        self.tasks = tasks
        self.config = config or DispatcherConfig()
        self.wake = threading.Event()
        self.stop = threading.Event()
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()
        # One callable per batch in flight (see ``_batch_watcher``).
        self._batch_watchers: dict[str, Callable] = {}
        # One callable per state directory, so re-arming a watch never adds a second one.
        self._state_watchers = {s: self._one_shot(f"job:{s}") for s in JOB_WORK_STATES}
        # The batch of each Pending job, and the turns batches take, for ``_fair``.
        self._batch_of: dict[str, str | None] = {}
        self._turns = Turns()
        # Per RQ queue: the look-ahead now, and whether the last sweep left work behind.
        self._ahead: dict[str, int] = {}
        self._backlog: dict[str, bool] = {}
        self._lanes = Lanes(self.config.lanes)
        # Whether our workers may run each item (``sides``); an item's data never changes.
        self._runs: dict[tuple[str, str], bool] = {}
        self.enqueued = 0
        # When the last sweep began (``run`` spaces them by ``settle``).
        self._swept = 0.0

    # --- watches: callbacks only mark what changed and wake the loop ----------

    def _mark(self, what: str) -> None:
        with self._dirty_lock:
            self._dirty.add(what)
        self.wake.set()

    def install_watches(self) -> None:
        """Watches on the batches and the pause; the state directories' watches are armed
        by each sweep's own listing (see ``sweep_job_state``)."""
        client = self.store.client
        for status in JOB_WORK_STATES:
            client.ensure_path(t.job_state_dir(status))
        self._watch(t.BATCHES, "batches")
        self._watch(t.LOCK_QUEUE, "all")
        client.ensure_path(t.LOCK_COLLECTIONS)
        self._watch(t.LOCK_COLLECTIONS, "holds")

    def _one_shot(self, what: str):
        def watcher(_event) -> None:
            if not self.stop.is_set():
                self._mark(what)

        return watcher

    def _watch(self, path: str, what: str) -> None:
        # allow_session_lost: keep watching after a session expiry (ZooKeeper restarts).
        ChildrenWatch(self.store.client, path, self._children_cb(what), allow_session_lost=True)

    def _children_cb(self, what: str):
        def callback(_children) -> bool:
            if self.stop.is_set():
                return False
            self._mark(what)
            return True

        return callback

    def _batch_watcher(self, bid: str):
        """The one-shot watcher of a batch's status node (while Pending) and of its
        processing directory (while Processing): either change marks the batch alone."""
        watcher = self._batch_watchers.get(bid)
        if watcher is None:
            watcher = self._batch_watchers[bid] = self._one_shot(f"batch:{bid}")
        return watcher

    # --- sweeps ----------------------------------------------------------------

    def _paused(self) -> bool:
        return pause_flag(self.store.client).paused()

    def sweep(self) -> int:
        """Enqueue everything that has work; the number of RQ jobs enqueued."""
        self._swept = time.monotonic()
        # What was marked before now is covered (the watches' first calls, on installing).
        with self._dirty_lock:
            self._dirty.clear()
        self.follow_holds()
        if self.config.workers == NONE or self._paused():
            return 0
        count = sum(self.sweep_job_state(s) for s in JOB_WORK_STATES)
        return count + self.sweep_batches()

    def sweep_dirty(self) -> int:
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        if not dirty:
            return 0
        self._swept = time.monotonic()
        if "all" in dirty:
            return self.sweep()
        if "holds" in dirty:
            self.follow_holds()
        if self.config.workers == NONE or self._paused():
            return 0
        count = sum(self.sweep_job_state(w[4:]) for w in dirty if w.startswith("job:"))
        if "batches" in dirty:
            return count + self.sweep_batches()
        marked = sorted(w[6:] for w in dirty if w.startswith("batch:"))
        return count + (self.sweep_batches(marked) if marked else 0)

    def follow_holds(self) -> None:
        """Held and released items follow the collection holds (``follow_collection_holds``):
        at every full sweep, and when a hold is placed or lifted by either side."""
        try:
            held, released = self.store.held.follow_collection_holds()
        except QueueError as e:
            log.warning("collection holds not followed this time: %s", describe(e))
            return
        if held or released:
            log.info("collection holds: held %s, released %s", held, released)

    def sweep_job_state(self, status: str) -> int:
        """Enqueue this state's unlocked jobs, in serving order, up to the look-ahead.

        Jobs already queued are known from one read of the queue and skipped before
        any other check, so a sweep costs a few round trips, not several per job.

        Each lane (``lanes``) has its own RQ queue and look-ahead; a job's lane is asked of
        the same rule the hand-over and the workers' chains ask. While the normal lane is
        full, the listing is looked through a little further for small jobs only.

        The listing arms a one-shot watch on the directory: its next change marks the
        state for another sweep. A full queue is not listed (a listing of a long backlog
        is the costly part); the state stays marked instead, and is looked at again
        after ``settle`` seconds, until the workers have made room.
        """
        fills = (self._fill(job_queue_name(status)), self._fill(express_queue_name(status)))
        if all(f.full for f in fills):
            self._mark(f"job:{status}")
            return 0
        listed = self.store.jobs.jobs_in_state(status, watch=self._state_watchers[status])
        id_of = {jid: rq_job_id("job", jid, status) for _, jid in listed}
        priority_of = {jid: p for p, jid in listed}
        queued = fills[0].queued | fills[1].queued
        for fill in fills:
            # The least urgent job already waiting in the lane: one more urgent goes ahead.
            priorities = (p for p, jid in listed if id_of[jid] in fill.queued)
            fill.last_served = max(priorities, default=None)
        if status == JobStatus.PENDING:
            listed = self._fair(listed, {jid for jid, job_id in id_of.items() if job_id in queued})
        entries = [(jid, id_of[jid]) for _, jid in listed if id_of[jid] not in queued]
        # Locked jobs (running, or chained through by a worker) sit at the head of the
        # order: look a little past the budget, not through the whole backlog.
        size = sum(max(0, f.budget - len(f.queued)) for f in fills) + 8
        beyond = 0  # entries looked at while the normal lane was full
        for chunk in _chunks(entries, size):
            locks = self.store.reads.held_many([t.job_node(jid, "lock") for jid, _ in chunk])
            free = [e for e, locked in zip(chunk, locks, strict=True) if not locked]
            free = self._runnable("job", free, status)
            lanes = self._lanes.express(self.store, status, [(j, priority_of[j]) for j, _ in free])
            deferred = self._deferred(j for _, j in free)
            for (jid, job_id), waiting, express in zip(free, deferred, lanes, strict=True):
                fill = fills[express]
                if fill.full:
                    fill.backlog = True
                    continue
                if waiting:
                    continue
                if fill.last_served is not None and priority_of[jid] < fill.last_served:
                    fill.ahead.append((jid, job_id))
                elif self._enqueue(fill.queue, self.tasks.job_step, (jid, status), job_id):
                    fill.count += 1
                    self._handed(status, jid)
            if fills[0].full:
                beyond += len(chunk)
                last = priority_of[chunk[-1][0]]
                if (
                    fills[1].full
                    or beyond > EXPRESS_SCAN
                    or not self._small_may_follow(status, last)
                ):
                    break
        count = 0
        for fill in fills:
            self._backlog[fill.queue.name] = fill.backlog
            count += fill.count + self._enqueue_ahead(fill.queue, status, fill.ahead)
        return count

    def _fill(self, name: str) -> _Fill:
        queue = Queue(name, connection=self.redis)
        queued = set(queue.get_job_ids())
        return _Fill(queue, queued, self._look_ahead(name, len(queued)))

    def _small_may_follow(self, status: str, priority: int) -> bool:
        """Whether a job listed after one of ``priority`` may go to the express lane: the
        listing is in priority order, and before Estimating only the priority counts."""
        return self.config.lanes.needs_size(status, priority)

    def _enqueue_ahead(self, queue: Queue, status: str, ahead: list[tuple[str, str]]) -> int:
        """Enqueue ``ahead`` (in serving order) at the queue's front, the most urgent last so
        that it ends up first."""
        count = 0
        for jid, job_id in reversed(ahead):
            args = (jid, status)
            if self._enqueue(queue, self.tasks.job_step, args, job_id, at_front=True):
                count += 1
                self._handed(status, jid)
        return count

    def _handed(self, status: str, jid: str) -> None:
        if status == JobStatus.PENDING:
            self._turns.handed(self._batch_of.get(jid))

    def _fair(self, listed: list[tuple[int, str]], handed: set[str]) -> list[tuple[int, str]]:
        """The Pending jobs not ``handed`` out (enqueued) yet, batches taking turns within a
        priority (``fairness``).

        A job's batch never changes, so each is read once, when first listed, and forgotten
        once it has left Pending.
        """
        jids = [jid for _, jid in listed]
        known = self._batch_of
        missing = [jid for jid in jids if jid not in known]
        if missing:
            known.update(self.store.jobs.job_node_values(missing, "bid", decode=t.decode_str))
        self._batch_of = {jid: known[jid] for jid in jids}
        return self._turns.order(listed, self._batch_of, handed)

    def _runnable(self, kind: str, entries: list, status: str = "") -> list:
        """The entries (id first) our workers may take on: a job's steps (``job``), a
        Pending batch's job creation (``batch``) or a batch's report (``report``). Each
        item's data is read once, and each decision remembered."""
        ids = [e[0] if isinstance(e, tuple) else e for e in entries]
        kind = f"{kind}:{status}" if status else kind
        missing = [i for i in ids if (kind, i) not in self._runs]
        if missing:
            if len(self._runs) > RUNS_CACHE_MAX:
                self._runs = {}
            mode = self.config.workers
            rule: Callable[[str, Mapping[str, Any] | None], bool]
            if status:
                data = self.store.jobs.job_node_values(missing, "configuration")
                rule = lambda mode, d: runs_job(mode, d, status)  # noqa: E731
            else:
                data = self.store.batches.batch_submissions(missing)
                rule = runs_batch if kind == "batch" else reports_batch
            self._runs.update({(kind, i): rule(mode, d) for i, d in data.items()})
        return [e for e, i in zip(entries, ids, strict=True) if self._runs.get((kind, i), False)]

    def _look_ahead(self, name: str, queued: int) -> int:
        """How many RQ jobs may wait now in queue ``name``.

        Doubled (up to ``ahead_growth`` times ``ahead``) when the workers emptied the queue
        since a sweep that left work behind: they may have sat idle. Halved (down to
        ``ahead``) when more than half is still waiting: the workers are the slower side,
        and a shorter queue lets a later high-priority job start sooner.
        """
        ahead = self._ahead.get(name, self.config.ahead)
        if queued == 0 and self._backlog.get(name, False):
            ahead = min(ahead * 2, self.config.ahead * self.config.ahead_growth)
        elif queued > ahead // 2:
            ahead = max(ahead // 2, self.config.ahead)
        self._ahead[name] = ahead
        return ahead

    def _deferred(self, job_ids) -> list[bool]:
        keys = [_later_key(j) for j in job_ids]
        return [v is not None for v in self.redis.mget(keys)] if keys else []

    def sweep_batches(self, bids: list[str] | None = None) -> int:
        """Enqueue the batches that have work: every batch, or only ``bids``.

        The reads arm one-shot watches, so a batch is looked at again the moment it moves
        on: a Pending batch's status node (it becomes Processing once turned into jobs),
        and the directory of jobs still processing of a batch in a reporting status (its
        last job leaving it makes the batch ready to report). Either marks that batch alone.
        Reporting is no exception: Merritt's ingest sets it while the jobs still run.
        """
        statuses = self.store.batches.batch_statuses(bids)
        wanted: dict[str, Any] = {b: st.get("status") for b, st in statuses.items()}
        pending = self._runnable(
            "batch", [b for b, s in wanted.items() if s == BatchStatus.PENDING]
        )
        waiting = self._runnable("report", [b for b, s in wanted.items() if s in REPORT_STATES])
        wanted = {b: wanted[b] for b in pending + waiting}
        if bids is None:  # forget the watchers of batches no longer in flight
            live = set(pending + waiting)
            self._batch_watchers = {b: w for b, w in self._batch_watchers.items() if b in live}
        self.store.reads.watch_nodes(
            {t.batch_node(b, "status"): self._batch_watcher(b) for b in pending}
        )
        dirs = {b: t.batch_job_dir(b, "batch-processing") for b in waiting}
        jobs_left = self.store.reads.children_many(
            dirs.values(), watches={path: self._batch_watcher(b) for b, path in dirs.items()}
        )
        candidates = pending + [b for b in waiting if jobs_left[dirs[b]] == []]
        return self._enqueue_batches(sorted(candidates), wanted)

    def _enqueue_batches(self, bids: list[str], status_of: dict[str, str]) -> int:
        pending_q = Queue(BATCH_PENDING_QUEUE, connection=self.redis)
        report_q = Queue(BATCH_REPORT_QUEUE, connection=self.redis)
        count = 0
        locks = self._locked(t.batch_node(b, "lock") for b in bids)
        for bid in (b for b, locked in zip(bids, locks, strict=True) if not locked):
            status = status_of[bid]
            if status == BatchStatus.PENDING:
                queue, task = pending_q, self.tasks.batch_pending
            else:
                queue, task = report_q, self.tasks.batch_report
            job_id = rq_job_id("batch", bid, status)
            if not is_deferred(self.redis, job_id):
                count += self._enqueue(queue, task, (bid, status), job_id)
        return count

    def _locked(self, paths: Iterable[str]) -> list[bool]:
        return self.store.reads.exists_many(list(paths))

    def _enqueue(
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

    # --- the loop ----------------------------------------------------------------

    def tick(self) -> float:
        """Call the ``on_tick`` hook; the seconds until it is due again.

        Whatever the hook raises is logged and the hook called again soon: a fault in the
        project's periodic work must not stop the dispatching.
        """
        wait = self.config.tick_interval
        if self.on_tick is None:
            return wait
        try:
            asked = self.on_tick()
        except Exception:
            log.exception("dispatcher tick failed, retrying")
            return min(wait, 5.0)
        return wait if asked is None else min(wait, max(asked, 0.0))

    def run(self) -> None:
        """Sweep now, then on every watch event and every ``sweep_interval`` seconds; call
        the tick hook first (a maintenance window on at start-up holds what it holds before
        anything is enqueued), then whenever it is due."""
        self.install_watches()
        next_full = next_tick = 0.0
        while not self.stop.is_set():
            if time.monotonic() >= next_tick:
                next_tick = time.monotonic() + self.tick()
            try:
                if time.monotonic() >= next_full:
                    began = time.monotonic()
                    enqueued = self.sweep()
                    took = time.monotonic() - began
                    # For the Workers page: when the safety net last ran, and how it went.
                    workerfacts.dispatcher_swept(
                        self.redis, socket.gethostname(), os.getpid(), enqueued, took
                    )
                    next_full = time.monotonic() + self.config.sweep_interval
                else:
                    self.sweep_dirty()
            # KazooTimeoutError is not a KazooException: a request made while ZooKeeper is
            # away times out with it, and it must not end the loop.
            except (KazooException, KazooTimeoutError, RedisError, OSError) as e:
                log.warning("dispatch sweep failed, retrying: %s", describe(e))
                next_full = time.monotonic() + 1.0
            self.wake.wait(timeout=max(0.05, min(1.0, next_full - time.monotonic())))
            # At most one sweep per ``settle``: a burst of watch events (a busy queue) makes
            # one sweep, while the first event after a quiet spell (a small deposit on an
            # idle queue) is served at once instead of waiting for a burst that never comes.
            self.stop.wait(max(0.0, self._swept + self.config.settle - time.monotonic()))
            self.wake.clear()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


_T = TypeVar("_T")


def _chunks(items: list[_T], size: int) -> Iterable[list[_T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
