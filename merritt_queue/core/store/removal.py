"""Removal from the store: purging finished jobs and batches from the tree.

Guarantee: only a Deleted job, or the finished jobs of a removable batch, are removed, and
never one a worker holds; each job goes in its own multi and the batch last, in one multi
checked on its status version, so a crash leaves a consistent tree.
"""

from __future__ import annotations

from .. import parking
from .. import tree as t
from ..errors import Locked, NotFound, NotRemovable, QueueError
from ..records import JobRecord, Op, OpKind
from ..states import REMOVABLE
from .batches import Batches
from .jobs import Jobs
from .shared import Shared

# Jobs of a batch removed a round at a time: reads and multis pipelined, a bounded number in
# flight.
PURGE_CHUNK = 100


class Removal:
    """Purges of jobs and batches."""

    def __init__(self, shared: Shared, jobs: Jobs, batches: Batches):
        self.engine = shared.engine
        self.reads = shared.reads
        self.changes = shared.changes
        self.jobs = jobs
        self.batches = batches

    def purge_job(self, jid: str, *, with_batch: bool = False) -> None:
        """Remove a Deleted job (or, when its batch is removed, any finished job)."""
        job = self.jobs.get_job(jid)
        self._check_removable(job, with_batch)
        ops = self._job_ops(job, self.reads.children(t.job_path(jid)))
        self.engine.commit(ops, f"remove job {jid}")
        self.changes.changed("job", jid, job.status, removed=True)

    @staticmethod
    def _check_removable(job: JobRecord, with_batch: bool) -> None:
        allowed = {"Deleted"} if not with_batch else {"Deleted", "Completed", "Failed"}
        if job.status not in allowed:
            raise NotRemovable(f"job {job.jid} is {job.status}; only a Deleted job can be removed")
        if job.locked:
            raise Locked(f"job {job.jid} is locked by a worker; not removed")

    @staticmethod
    def _job_ops(job: JobRecord, children: list[str]) -> list[Op]:
        jid = job.jid
        ops = [
            Op(
                OpKind.DELETE,
                t.job_node(jid, c),
                version=job.status_version if c == "status" else -1,
            )
            for c in children
        ]
        ops.append(Op(OpKind.DELETE, t.job_path(jid)))
        ops += [Op(OpKind.DELETE, job.index_path, tolerant=True)]
        if job.bid:
            ops.append(Op(OpKind.DELETE, t.batch_job_ref(job.bid, job.status, jid), tolerant=True))
        return ops

    def _purge_batch_jobs(self, jids: list[str]) -> None:
        """The jobs of a batch being removed, each in its own multi as ``purge_job`` writes
        it, a chunk at a time: the reads of a chunk in two pipelined rounds, its multis in
        one. Every job of a chunk is checked before any of them is removed."""
        for start in range(0, len(jids), PURGE_CHUNK):
            chunk = jids[start : start + PURGE_CHUNK]
            locks = [self.engine.client.exists_async(t.job_node(j, "lock")) for j in chunk]
            reads = [self.jobs.send_read(j) for j in chunk]
            self.reads.stats["round_trips"] += 1
            jobs = []
            for jid, read, lock in zip(chunk, reads, locks, strict=True):
                try:
                    job = self.jobs.from_read(jid, read, parking.held(lock.get()))
                except NotFound:  # a reference without its job: the batch removal drops it
                    continue
                self._check_removable(job, True)
                jobs.append(job)
            children = self.reads.children_many(t.job_path(j.jid) for j in jobs)
            multis = [
                (self._job_ops(j, children[t.job_path(j.jid)] or []), f"remove job {j.jid}")
                for j in jobs
            ]
            results = self.engine.commit_many(multis)
            for job, result in zip(jobs, results, strict=True):
                if not isinstance(result, QueueError):
                    self.changes.changed("job", job.jid, job.status, removed=True)
            failed = next((r for r in results if isinstance(r, QueueError)), None)
            if failed is not None:
                raise failed

    def purge_batch(self, bid: str) -> list[str]:
        """Remove a Completed or Deleted batch, all its jobs and its uuid entry.

        1. Refuse unless the batch is removable, unlocked, with no job processing.
        2. Remove each job in its own multi (so a crash leaves a consistent tree), the
           multis of a chunk pipelined.
        3. Remove the batch subtree and uuid entry in one multi checked on the
           status version.
        """
        batch = self.batches.get_batch(bid)
        if batch.status not in REMOVABLE:
            raise NotRemovable(
                f"batch {bid} is {batch.status}; only Completed or Deleted batches are removed"
            )
        if batch.locked:
            raise Locked(f"batch {bid} is locked by a worker; not removed")
        jobs = self.batches.batch_jobs(bid)
        if jobs["batch-processing"]:
            count = len(jobs["batch-processing"])
            raise NotRemovable(f"batch {bid} still has {count} job(s) processing; not removed")
        removed = [
            jid for d in ("batch-completed", "batch-failed", "batch-deleted") for jid in jobs[d]
        ]
        self._purge_batch_jobs(removed)
        ops = [
            Op(OpKind.DELETE, p)
            for p in self._subtree(t.batch_path(bid))
            if p != t.batch_node(bid, "status")
        ]
        ops.insert(-1, Op(OpKind.DELETE, t.batch_node(bid, "status"), version=batch.status_version))
        if batch.uuid and self.batches.find_batch_by_uuid(batch.uuid) == bid:
            ops.append(Op(OpKind.DELETE, t.batch_uuid_path(batch.uuid)))
        self.engine.commit(ops, f"remove batch {bid}")
        self.changes.changed("batch", bid, batch.status, removed=True)
        return removed

    def _subtree(self, root: str) -> list[str]:
        """Every path under and including ``root``, children before parents."""
        out: list[str] = []

        def walk(path: str) -> None:
            for child in self.reads.children(path):
                walk(f"{path}/{child}")
            out.append(path)

        walk(root)
        return out
