"""The consistency check's checker: what every group of checks (``consistency``'s own and
``indexchecks``, ``lockchecks``, ``merrittchecks``, ``reportchecks``, ``uuidchecks``) reads
and adds to: the tree as read, its indexes by job, the findings and their planned repairs.
Its own module, so that the check modules take it without importing ``consistency``, which
runs them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.protocol.states import ZnodeStat

from .. import history
from .. import tree as t
from ..states import JobStatus
from ..store.engine import Engine
from ..store.reads import Reads
from ..treeread import _Batch, _Item, _Job, _Tree
from . import treerepair as r
from .treerepair import Op, RepairFailed

FINISHED_JOB = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.DELETED})

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


class Checker:
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
        reads: Reads | None = None,
    ):
        self.client = client
        # The store's engine when the store is at hand: repairs are its multis.
        self.engine = engine or Engine(client)
        self.reads = reads or Reads(client, self.engine.stats)
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
        if must_be_absent and r.exists(self.reads, must_be_absent):
            raise RepairFailed(f"{what} exists now; run the check again")
        return ops

    def young(self, head: str, age: float) -> str:
        return (
            f"{head}; it was created {_age(age)} ago, within the grace period of "
            f"{_age(self.grace)}, and may still be being created, so it is only reported. "
            "Check again later."
        )

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
