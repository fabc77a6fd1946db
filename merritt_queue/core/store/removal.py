"""Removal from the store: purging finished jobs and batches from the tree.

Guarantee: only a Deleted job, or the finished jobs of a removable batch, are removed, and
never one a worker holds; each job goes in its own multi and the batch last, in one multi
checked on its status version, so a crash leaves a consistent tree.
"""

from __future__ import annotations

from .. import tree as t
from ..errors import Locked, NotFound, NotRemovable
from ..records import Op, OpKind
from ..states import REMOVABLE
from .batches import Batches
from .jobs import Jobs
from .shared import Shared


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
        allowed = {"Deleted"} if not with_batch else {"Deleted", "Completed", "Failed"}
        if job.status not in allowed:
            raise NotRemovable(f"job {jid} is {job.status}; only a Deleted job can be removed")
        if job.locked:
            raise Locked(f"job {jid} is locked by a worker; not removed")
        children = self.reads.children(t.job_path(jid))
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
        self.engine.commit(ops, f"remove job {jid}")
        self.changes.changed("job", jid, job.status, removed=True)

    def purge_batch(self, bid: str) -> list[str]:
        """Remove a Completed or Deleted batch, all its jobs and its uuid entry.

        1. Refuse unless the batch is removable, unlocked, with no job processing.
        2. Remove each job in its own multi (so a crash leaves a consistent tree).
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
        removed = []
        for d in ("batch-completed", "batch-failed", "batch-deleted"):
            for jid in jobs[d]:
                try:
                    self.purge_job(jid, with_batch=True)
                except NotFound:  # a reference without its job: the batch removal drops it
                    pass
                removed.append(jid)
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
