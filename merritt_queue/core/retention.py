"""The retention policy: finished items leave the tree by themselves, so that no index directory
grows toward the listing limit of a Java client (``indexdirs``) while nobody runs cleanup.

What may go is what cleanup may remove (``store.removal``), narrowed further:

- a Completed or Deleted batch, with every one of its jobs Completed or Deleted (none at work,
  held or Failed: a librarian decides about those), taken with its jobs;
- a Deleted job, on its own.

When: an item whose status was last written longer ago than the retention goes at the next
pass (a pass every ``PASS_EVERY`` seconds); and while a directory that removal can shrink
lists more than ``PRESSURE_FRACTION`` of the limit, finished items go whatever their age,
oldest first (lowest id first, as Merritt's own cleanup orders them), until it no longer does.

A pass is done a slice at a time: at most ``slice_items`` removals and ``slice_seconds`` per
call, so that the dispatcher, which calls it from its loop, keeps dispatching; the next slice
is due at once. Nothing here keeps state outside the process: a dispatcher that restarts
begins a new pass.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from . import indexdirs
from . import tree as t
from .errors import NotFound, QueueError
from .states import REMOVABLE, JobStatus
from .store import QueueStore

# Finished items go, whatever their age, while a shrinkable directory lists more than this
# share of the limit: well under the warning, so that a burst finds room.
PRESSURE_FRACTION = 0.5
PASS_EVERY = 600.0
# A pass that removed nothing and left a directory under pressure (what keeps it there is not
# removable: jobs at work, held or Failed) is not begun again at once: each pass reads every
# batch's status.
PRESSURE_GAP = 60.0
SLICE_SECONDS = 1.0
SLICE_ITEMS = 200
# Statuses read in one round.
READ_CHUNK = 50
# The directories removal shrinks; the others hold only jobs waiting, at work, held or Failed.
SHRINKABLE = frozenset(
    {t.JOBS, t.BATCHES, t.BATCH_UUIDS, t.job_state_dir("completed"), t.job_state_dir("deleted")}
)
WHAT_TO_DO = {
    t.job_state_dir("failed"): "failed jobs are never removed by retention: a librarian must "
    "resume or delete them",
    t.job_state_dir("held"): "held jobs are never removed by retention: release or delete them",
}


@dataclass(frozen=True)
class Policy:
    # None: no rule by age; only the pressure of a directory near the limit removes.
    retention_seconds: float | None
    limit: int = indexdirs.DEFAULT_MAXBUFFER
    pressure_fraction: float = PRESSURE_FRACTION


@dataclass
class Removed:
    """One item looked at and removed (or failed to be): an audit row."""

    item_id: str
    kind: str
    before_status: str
    before_version: int | None
    result: str
    detail: str
    why: str


@dataclass
class Slice:
    rows: list[Removed]
    more: bool
    wait: float
    sizes: list[indexdirs.DirSize] = field(default_factory=list)


class Retention:
    """One dispatcher's retention: call ``step()`` from its periodic hook."""

    def __init__(
        self,
        store: QueueStore,
        policy: Policy,
        *,
        now: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store, self.policy, self.now, self.clock = store, policy, now, clock
        self.slice_items, self.slice_seconds = SLICE_ITEMS, SLICE_SECONDS
        self._work: deque[tuple[str, str]] | None = None
        self._next_pass = self._next_pressure_pass = 0.0
        self._pass_removed = 0

    def measure(self) -> list[indexdirs.DirSize]:
        return indexdirs.measure(self.store.client, self.policy.limit)

    def pressured(self, sizes: list[indexdirs.DirSize]) -> bool:
        return any(s.path in SHRINKABLE and s.ratio >= self.policy.pressure_fraction for s in sizes)

    def step(self) -> Slice:
        sizes = self.measure()
        pressure = self.pressured(sizes)
        if self._work is None:
            now = self.clock()
            by_age_due = self.policy.retention_seconds is not None and now >= self._next_pass
            if not (by_age_due or (pressure and now >= self._next_pressure_pass)):
                due = self._next_pressure_pass if pressure else self._next_pass
                return Slice([], False, max(due - now, 0.0), sizes)
            self._work, self._pass_removed = self._plan(), 0
        rows: list[Removed] = []
        deadline = self.clock() + self.slice_seconds
        while self._work and len(rows) < self.slice_items and self.clock() < deadline:
            kind = self._work[0][0]
            chunk: list[str] = []
            while self._work and self._work[0][0] == kind and len(chunk) < READ_CHUNK:
                chunk.append(self._work.popleft()[1])
            statuses = self._statuses(kind, chunk)
            for i, item_id in enumerate(chunk):
                if len(rows) >= self.slice_items or self.clock() >= deadline:
                    self._work.extendleft((kind, x) for x in reversed(chunk[i:]))
                    break
                why = self._why(kind, statuses.get(item_id), pressure)
                if why is None:
                    continue
                row = self._remove(kind, item_id, statuses[item_id], why)
                if row is None:
                    continue
                rows.append(row)
                if why == "pressure":
                    sizes = self.measure()
                    pressure = self.pressured(sizes)
        self._pass_removed += len(rows)
        if self._work:
            return Slice(rows, True, 0.0, sizes)
        self._work = None
        self._next_pass = self.clock() + PASS_EVERY
        if not pressure:
            return Slice(rows, False, PASS_EVERY, sizes)
        # Still under pressure: items finished during the pass are due at once.
        gap = PRESSURE_GAP if not self._pass_removed else 0.0
        self._next_pressure_pass = self.clock() + gap
        return Slice(rows, False, gap, sizes)

    def _plan(self) -> deque[tuple[str, str]]:
        """Deleted jobs, then batches, each oldest first."""
        reads = self.store.reads
        deleted = [t.parse_index_name(n) for n in reads.children(t.job_state_dir("deleted"))]
        jids = sorted({p[1] for p in deleted if p})
        bids = self.store.batches.list_batch_ids()
        return deque([("job", j) for j in jids] + [("batch", b) for b in bids])

    def _statuses(self, kind: str, ids: list[str]) -> dict[str, tuple[dict, int]]:
        node = t.job_node if kind == "job" else t.batch_node
        got = self.store.reads.get_many(node(i, "status") for i in ids)
        out = {}
        for i in ids:
            read = got.get(node(i, "status"))
            if read is not None:
                out[i] = (t.decode_json(read[0]) or {}, read[1].version)
        return out

    def _why(self, kind: str, read: tuple[dict, int] | None, pressure: bool) -> str | None:
        if read is None:
            return None
        status = read[0].get("status")
        finished = status in REMOVABLE if kind == "batch" else status == JobStatus.DELETED
        if not finished:
            return None
        if self._old(read[0].get("last_modified")):
            return "age"
        return "pressure" if pressure else None

    def _old(self, last_modified: str | None) -> bool:
        if self.policy.retention_seconds is None:
            return False
        when = t.parse_timestamp(last_modified)
        if when is None:  # no readable time: never removed on a guess by age
            return False
        return when.timestamp() <= self.now() - self.policy.retention_seconds

    def _remove(self, kind: str, item_id: str, read: tuple[dict, int], why: str) -> Removed | None:
        status, version = read[0].get("status", ""), read[1]
        try:
            if kind == "job":
                self.store.removal.purge_job(item_id)
                detail = "removed"
            else:
                if not self._only_finished_jobs(item_id):
                    return None
                detail = f"removed with {len(self.store.removal.purge_batch(item_id))} job(s)"
        except NotFound:
            return None
        except QueueError as e:
            return Removed(item_id, kind, status, version, "failed", str(e), why)
        return Removed(item_id, kind, status, version, "done", detail, why)

    def _only_finished_jobs(self, bid: str) -> bool:
        jobs = self.store.batches.batch_jobs(bid)
        return not jobs["batch-processing"] and not jobs["batch-failed"]


def warnings(sizes: list[indexdirs.DirSize]) -> list[str]:
    """What to tell an operator about each directory past the warning share of the limit."""
    out = []
    for s in sizes:
        if not s.warning:
            continue
        if s.path in SHRINKABLE:
            todo = "retention removes the oldest finished items (MQ_CLEANUP_*), or run cleanup"
        else:
            todo = WHAT_TO_DO.get(s.path, "jobs waiting or at work: the queue is backed up")
        out.append(
            f"{s.path} lists {s.bytes} bytes ({s.children} children), {100 * s.ratio:.0f} % of "
            f"the {s.limit}-byte limit (MQ_ZK_MAXBUFFER) past which a Java ZooKeeper client "
            f"cannot list it: {todo}."
        )
    return out
