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
from typing import TYPE_CHECKING

from .. import batch_sides, history, steprecord
from .. import tree as t
from ..states import REMOVABLE, BatchStatus
from ..treeread import _Batch, _Item, _Job, read_tree
from . import accesschecks, indexchecks, lockchecks, merrittchecks, reportchecks, uuidchecks
from . import treerepair as r
from .checker import Checker, Finding, OnProgress, _age

if TYPE_CHECKING:
    from ..store import QueueStore

# What a crashed non-atomic create (MerrittZK's) may leave under a job before
# its configuration: a batch id and two numbers, no depositor data. Its recursive
# delete, interrupted, may also leave our ``history`` and ``steps``: records of ours, not data.
SHELL_JOB_CHILDREN = frozenset({"bid", "priority", "space_needed", history.NODE, steprecord.NODE})
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


class _Checker(Checker):
    """The checks of each batch and job, and the runs of the check modules over the tree."""

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
        accesschecks.check_access(self)

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
        reads=store.reads,
    )
    checker.progress.report = progress
    checker.run()
    if repair:
        checker.repair()
    checker.progress.end()
    return sorted(checker.findings, key=lambda f: (f.kind, f.path))
