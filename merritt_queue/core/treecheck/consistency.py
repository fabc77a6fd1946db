"""Consistency check of the queue tree (zk-tree.md), and its safe repairs.

Guarantees:

- Reading never writes. ``check_tree(store)`` issues only ``get`` and
  ``get_children`` requests, pipelined (all of one level issued, then
  collected), so a tree of 100,000 jobs is read in a handful of round trips.
- ``check_tree(store, repair=True)`` makes only changes that are safe. Each
  repair is one ZooKeeper ``multi``; where a job's or batch's status decides
  what is right, the multi checks the status node at the version the check
  read (and the ``priority`` or ``bid`` node where those decide it), so an item
  that moved since it was read is left alone and the finding says so.
- A batch or job that could hold a depositor's data is never deleted. The
  only items removed are (a) provably empty half-created shells older than
  the grace period: no ``status``, no ``submission``/``configuration``, no
  lock, nothing naming them; and (b) an orphan job (its batch is gone) that is
  Completed or Deleted, which cleanup removes anyway (zk-tree.md: only
  Completed or Deleted items can be removed). Everything else deleted is
  bookkeeping that holds no data: index entries, batch references, uuid
  entries and persistent storage locks no job is using.
- An ephemeral lock is never removed: it exists only while its owner's
  session is alive, so removing it would let a second worker in. It is
  reported with the owner session id.

The tree may be moving while it is read: a job moved between two reads can
show up as a finding that the next run no longer reports. Repairs never act
on such a stale read; they fail with "changed since the check read it".
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kazoo.protocol.states import ZnodeStat

from .. import batch_sides, history
from .. import tree as t
from ..states import REMOVABLE, BatchStatus, JobStatus
from ..store.engine import Engine
from ..treeread import (
    _Batch,
    _Item,
    _Job,
    _Tree,
    read_tree,
)
from . import indexchecks, lockchecks, merrittchecks, reportchecks, uuidchecks
from . import treerepair as r
from .treerepair import Op, RepairFailed

if TYPE_CHECKING:
    from ..store import QueueStore

# What a crashed non-atomic create (MerrittZK's) may leave under a job before
# its configuration: a batch id and two numbers, no depositor data. Its recursive
# delete, interrupted, may also leave our ``history``: a record of ours, not data.
SHELL_JOB_CHILDREN = frozenset({"bid", "priority", "space_needed", history.NODE})
FINISHED_JOB = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.DELETED})
# Batch statuses reached only through acquisition (Deleted is also reached from Held).
PAST_PENDING = frozenset(
    {
        BatchStatus.PROCESSING,
        BatchStatus.REPORTING,
        BatchStatus.UPDATE_REPORTING,
        BatchStatus.COMPLETED,
        BatchStatus.FAILED,
    }
)


# Told (done, total) as the check goes: the items checked, then the repairs tried.
OnProgress = Callable[[int, int], None]
# Items between two reports: often enough for a progress bar, rarely enough to cost nothing.
PROGRESS_EVERY = 200


class Progress:
    def __init__(self, total: int, report: OnProgress | None):
        self.total, self.done, self.report = total, 0, report

    def step(self) -> None:
        self.done += 1
        if self.report is not None and self.done % PROGRESS_EVERY == 0:
            self.report(self.done, self.total)

    def end(self) -> None:
        if self.report is not None:
            self.report(self.total, self.total)


@dataclass
class Finding:
    kind: str
    path: str
    reason: str
    repair: str | None
    repaired: bool = False


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class _Checker:
    def __init__(
        self,
        client,
        tree: _Tree,
        *,
        lock_max_age: float,
        grace: float,
        now: float,
        actor: str = history.REPAIR,
        engine: Engine | None = None,
    ):
        self.client = client
        # The store's engine when the store is at hand: repairs are its multis.
        self.engine = engine or Engine(client)
        # Who a repair that writes a status is recorded as, in the item's history.
        self.actor = actor
        self.tree = tree
        self.lock_max_age = lock_max_age
        self.grace = grace
        self.now = now
        self.findings: list[Finding] = []
        self.plans: list[tuple[list[Finding], Callable[[], list[Op]]]] = []
        self.index_by_jid: dict[str, list[str]] = defaultdict(list)
        self.refs_by_jid: dict[str, list[tuple[str, str]]] = defaultdict(list)  # (bid, path)
        self.jobs_by_batch: dict[str, list[str]] = defaultdict(list)
        self._by_ark: dict[str, list[_Job]] | None = None
        # Every item checked, then every repair tried.
        self.progress = Progress(len(tree.batches) + len(tree.jobs), None)
        self._index_tree()

    def _index_tree(self) -> None:
        for d, names in self.tree.index.items():
            for name in names:
                parsed = t.parse_index_name(name)
                if parsed:
                    self.index_by_jid[parsed[1]].append(f"{t.JOB_STATES}/{d}/{name}")
        for batch in self.live_batches():
            for d, names in batch.refs.items():
                for name in names:
                    self.refs_by_jid[name].append(
                        (batch.id, t.batch_job_dir(batch.id, d) + "/" + name)
                    )
        for job in self.tree.jobs.values():
            if job.bid:
                self.jobs_by_batch[job.bid].append(job.id)

    def live_batches(self) -> list[_Batch]:
        return [b for b in self.tree.batches.values() if b.has_status]

    def add(self, kind, path, reason, repair=None, plan=None) -> Finding:
        finding = Finding(kind, path, reason, repair)
        self.findings.append(finding)
        if plan is not None:
            self.plans.append(([finding], plan))
        return finding

    def age(self, stat: ZnodeStat) -> float:
        return self.now - stat.ctime / 1000

    def run(self) -> None:
        for batch in sorted(self.tree.batches.values(), key=lambda b: b.id):
            self.check_batch(batch)
            self.progress.step()
        for job in sorted(self.tree.jobs.values(), key=lambda j: j.id):
            self.check_job(job)
            self.progress.step()
        indexchecks.check_stray_index(self)
        indexchecks.check_stray_refs(self)
        uuidchecks.check_uuids(self)
        lockchecks.check_lock_dirs(self)

    def repair(self) -> None:
        self.progress.total += len(self.plans)
        for findings, plan in self.plans:
            self.progress.step()
            try:
                r.commit(self.engine, plan())
            except RepairFailed as e:
                for f in findings:
                    f.reason += f" Repair failed: {e}."
            else:
                for f in findings:
                    f.repaired = True

    def absent_ops(self, must_be_absent: str | None, what: str, ops: list[Op]) -> list[Op]:
        # ZooKeeper cannot check absence inside a multi; ids are never reused, so a
        # fresh look right before the delete is enough.
        if must_be_absent and r.exists(self.engine, must_be_absent):
            raise RepairFailed(f"{what} exists now; run the check again")
        return ops

    # --- batches -----------------------------------------------------------

    def check_batch(self, batch: _Batch) -> None:
        path = t.batch_path(batch.id)
        if not batch.has_status:
            self.half_created_batch(batch)
            return
        self.check_history(batch, f"Batch {batch.id}", t.batch_node(batch.id, history.NODE))
        if batch.problem:
            self.add("bad-status", path, f"Batch {batch.id}: {batch.problem}.")
            return
        if batch.submission_problem:
            self.add("bad-data", path, f"Batch {batch.id}: {batch.submission_problem}.")
        if batch.status in PAST_PENDING and "states" not in batch.children:
            self.not_acquired(batch)
        merrittchecks.check_batch(self, batch)
        reportchecks.check_batch(self, batch)
        lock = batch.node("lock")
        if lock and not batch_sides.is_tombstone(batch.status or "", lock):
            lockchecks.item_lock(
                self, t.batch_node(batch.id, "lock"), lock, f"Batch {batch.id}'s lock"
            )

    def half_created_batch(self, batch: _Batch) -> None:
        path, age = t.batch_path(batch.id), self.age(batch.stat)
        head = f"Batch {batch.id} has no status node"
        uuids = [u for u, n in self.tree.uuids.items() if n[0].decode(errors="replace") == batch.id]
        named = self.jobs_by_batch.get(batch.id, []) + uuids
        # A history alone is what an interrupted recursive delete (MerrittZK's) may leave.
        children = [c for c in batch.children if c != history.NODE]
        if lock := batch.node("lock"):
            merrittchecks.locked_shell(self, batch, lock)
        elif children or named:
            holds = f"it holds {', '.join(sorted(children))}" if children else ""
            names = f"{', '.join(sorted(named))} name(s) it" if named else ""
            self.add(
                "half-created-batch",
                path,
                f"{head}, but {' and '.join(x for x in (holds, names) if x)}; it may carry a "
                "depositor's submission, so it is left for a person to judge.",
            )
        elif age < self.grace:
            self.add("half-created-batch", path, self.young(head, age))
        else:
            version = batch.stat.version
            ops = [
                r.delete(t.batch_node(batch.id, c), self._version(batch, c)) for c in batch.children
            ]
            self.add(
                "half-created-batch",
                path,
                f"{head}: its creation (or removal) was interrupted {_age(age)} ago and it "
                "holds no data.",
                f"remove the empty node {path}",
                lambda: [*ops, r.delete(path, version)],
            )

    def young(self, head: str, age: float) -> str:
        return (
            f"{head}; it was created {_age(age)} ago, within the grace period of "
            f"{_age(self.grace)}, and may still be being created, so it is only reported. "
            "Check again later."
        )

    def not_acquired(self, batch: _Batch) -> None:
        states, version = t.batch_states(batch.id), batch.version("status")
        self.add(
            "batch-not-acquired",
            t.batch_path(batch.id),
            f"Batch {batch.id} is {batch.status} but has no states node, as if it had never "
            "been acquired; its jobs' references have nowhere to live.",
            f"create {states}",
            lambda: [r.check(t.batch_node(batch.id, "status"), version), r.create(states)],
        )

    def check_history(self, item: _Item, label: str, path: str) -> None:
        """A history node that cannot be read: reported, never a reason to leave the item."""
        node = item.node(history.NODE)
        if node is None or not history.decode(node[0]).damaged:
            return
        self.add(
            "damaged-history",
            path,
            f"{label}'s history (the record of its status changes, kept beside its status) "
            "cannot be read, so its earlier steps are not shown. The item itself is not "
            "affected, and its next status change starts the history afresh; nothing needs "
            "repairing.",
        )

    # --- jobs --------------------------------------------------------------

    def check_job(self, job: _Job) -> None:
        path = t.job_path(job.id)
        if not job.has_status:
            self.half_created_job(job)
            return
        if job.problem:
            self.add("bad-status", path, f"Job {job.id}: {job.problem}; it is left as it is.")
            return
        if lock := job.node("lock"):
            lockchecks.job_lock(self, job, lock)
        if self.orphan(job):
            return
        if job.priority_problem:
            self.add("bad-data", path, f"Job {job.id}: {job.priority_problem}.")
        else:
            indexchecks.check_index(self, job)
        indexchecks.check_refs(self, job)

    def half_created_job(self, job: _Job) -> None:
        age = self.age(job.stat)
        head = f"Job {job.id} has no status node"
        extra = [c for c in job.children if c not in SHELL_JOB_CHILDREN]
        if extra:
            self.add(
                "half-created-job",
                t.job_path(job.id),
                f"{head}, but it holds {', '.join(sorted(extra))}, which may be a depositor's "
                "data or a worker's lock, so it is left for a person to judge.",
            )
        elif age < self.grace:
            self.add("half-created-job", t.job_path(job.id), self.young(head, age))
        else:
            ops = [r.delete(t.job_node(job.id, c), self._version(job, c)) for c in job.children]
            ops.append(r.delete(t.job_path(job.id), job.stat.version))
            held = f" (it holds only {', '.join(sorted(job.children))})" if job.children else ""
            self.add(
                "half-created-job",
                t.job_path(job.id),
                f"{head}: its creation was interrupted {_age(age)} ago and it holds no data{held}.",
                f"remove the empty job {t.job_path(job.id)}",
                lambda: ops,
            )

    def orphan(self, job: _Job) -> bool:
        """Report a job whose batch is gone; True when its removal covers every other check."""
        batch = self.tree.batches.get(job.bid) if job.bid else None
        if batch is not None and batch.has_status:
            return False
        if not job.bid:
            why = "has no batch id"
        else:
            gone = "does not exist" if batch is None else "is only half-created"
            why = f"names batch {job.bid}, which {gone}"
        path = t.job_path(job.id)
        if job.status not in REMOVABLE or "lock" in job.children:
            held = " and is locked" if "lock" in job.children else ""
            self.add(
                "orphan-job",
                path,
                f"Job {job.id} is {job.status}{held} and {why}; an administrator decides "
                "whether to fail, delete or re-attach it.",
            )
            return False
        entries = self.index_by_jid.get(job.id, []) + [
            p for _, p in self.refs_by_jid.get(job.id, [])
        ]
        ops = [r.delete(t.job_node(job.id, c), self._version(job, c)) for c in job.children]
        ops += [r.delete(path)] + [r.delete(p) for p in entries]
        self.add(
            "orphan-job",
            path,
            f"Job {job.id} is {job.status} and {why}; "
            "cleanup would have removed it with its batch.",
            f"remove job {job.id} with its {len(entries)} index entry and reference node(s)",
            lambda: ops,
        )
        return True

    @staticmethod
    def _version(item: _Item, name: str) -> int:
        return item.version(name) if name in item.nodes else -1

    def job_guard(self, job: _Job, *names: str) -> list[Op]:
        """Checks that the job's status (and the named nodes) are still as read."""
        return [
            r.check(t.job_node(job.id, n), job.version(n))
            for n in ("status", *names)
            if job.node(n)
        ]


def check_tree(
    store: QueueStore,
    *,
    repair: bool = False,
    lock_max_age: float = 3600,
    grace: float = 300,
    now: float | None = None,
    progress: OnProgress | None = None,
) -> list[Finding]:
    """Read the whole tree and report what is inconsistent; repair it when asked.

    ``lock_max_age`` and ``grace`` are seconds; ``now`` (epoch seconds) is the
    time ages are measured against. Findings come sorted by kind, then path.
    ``progress`` is told ``(done, total)`` every few items checked and repairs tried;
    the total counts the repairs once the check has planned them.
    """
    checker = _Checker(
        store.client,
        read_tree(store.client),
        lock_max_age=lock_max_age,
        grace=grace,
        now=time.time() if now is None else now,
        actor=store.changes.actor or history.REPAIR,
        engine=store.engine,
    )
    checker.progress.report = progress
    checker.run()
    if repair:
        checker.repair()
    checker.progress.end()
    return sorted(checker.findings, key=lambda f: (f.kind, f.path))
