"""The sweeps: one state's jobs, or the batches, turned into RQ jobs in serving order.

Guarantees:

- At least once: every job in a working state and every batch with work to
  do is enqueued again until its step commits. A duplicate is harmless: the
  task re-checks status and lock under the lock before doing anything.
- Only what this site's workers may run (``sides``, the ``workers`` mode): a batch or job
  left to Merritt's own ingest is never enqueued.
- Priority: each state queue is filled in ``PP-JID`` order and only a few
  items ahead, so a later high-priority job is not stuck behind a backlog. New
  work (Pending) is shared: within a priority, batches take turns (``fairness``).
- Each listing arms a one-shot watch on what it read, so the item is swept again the moment
  it moves on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redis import Redis
from rq import Queue

from . import tree as t
from .fairness import Turns
from .lanes import Lanes, express_queue_name, job_queue_name
from .queues import (
    BATCH_PENDING_QUEUE,
    BATCH_REPORT_QUEUE,
    JOB_WORK_STATES,
    DispatcherConfig,
    Enqueuer,
    Tasks,
    _later_key,
    is_deferred,
    rq_job_id,
)
from .sides import reports_batch, runs_batch, runs_job
from .states import BatchStatus, JobStatus
from .store import QueueStore

# Batches the reporting task picks up: the ones whose jobs are all finished.
REPORT_STATES = (BatchStatus.PROCESSING, BatchStatus.REPORTING, BatchStatus.UPDATE_REPORTING)
# The decisions ``_runnable`` remembers, at most: forgotten all at once beyond that.
RUNS_CACHE_MAX = 200_000
# Entries looked through for small jobs past a full normal lane, at most, per sweep of a state.
EXPRESS_SCAN = 2000


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


class Sweeper:
    """Keeps the RQ queues filled from the tree, one state or the batches at a time."""

    def __init__(
        self,
        store: QueueStore,
        redis: Redis,
        tasks: Tasks,
        config: DispatcherConfig,
        mark: Callable[[str], None],
        stop: threading.Event,
    ):
        self.store = store
        self.redis = redis
        self.tasks = tasks
        self.config = config
        # Marks an item for the dispatcher's next sweep, and wakes it.
        self._mark = mark
        self.stop = stop
        self.rq = Enqueuer(redis, config)
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

    def _one_shot(self, what: str):
        def watcher(_event) -> None:
            if not self.stop.is_set():
                self._mark(what)

        return watcher

    def _batch_watcher(self, bid: str):
        """The one-shot watcher of a batch's status node (while Pending) and of its
        processing directory (while Processing): either change marks the batch alone."""
        watcher = self._batch_watchers.get(bid)
        if watcher is None:
            watcher = self._batch_watchers[bid] = self._one_shot(f"batch:{bid}")
        return watcher

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
                elif self.rq.enqueue(fill.queue, self.tasks.job_step, (jid, status), job_id):
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
            if self.rq.enqueue(queue, self.tasks.job_step, args, job_id, at_front=True):
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
                count += self.rq.enqueue(queue, task, (bid, status), job_id)
        return count

    def _locked(self, paths: Iterable[str]) -> list[bool]:
        return self.store.reads.exists_many(list(paths))


_T = TypeVar("_T")


def _chunks(items: list[_T], size: int) -> Iterable[list[_T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
