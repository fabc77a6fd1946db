"""Batches read from the store: one batch whole, the statuses of many, their jobs.

Guarantee: reading never writes. A batch's nodes are read in one round, its history after
its status (see ``history``).
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import batch_sides
from .. import history as h
from .. import multiread as mr
from .. import tree as t
from ..approval import APPROVAL
from ..errors import NotFound
from ..records import BatchRecord
from ..states import BATCH_JOB_DIRS, BatchStatus
from .historywrites import decode_node
from .shared import Shared


def batch_record(
    bid, submission, status, report, acquired, lock, *, history, approval=None
) -> BatchRecord:
    """The nodes as ``get`` returned them (None when missing), ``history`` included.

    A Deleted batch's tombstone (``batch_sides.is_tombstone``) is no lock: nobody holds it."""
    st = t.decode_json(status[0]) or {}
    locked = lock is not None and not batch_sides.is_tombstone(st.get("status", ""), lock)
    return BatchRecord(
        bid=bid,
        submission=t.decode_json(submission[0]) if submission else None,
        status=st.get("status", ""),
        last_modified=st.get("last_modified") or "",
        message=st.get("message") or "",
        status_version=status[1].version,
        acquired=acquired,
        locked=locked,
        status_report=t.decode_json(report[0]) if report else None,
        history=decode_node(history),
        approval=t.decode_json(approval[0]) if approval else None,
    )


class Batches:
    """Reads of batches."""

    def __init__(self, shared: Shared):
        self.reads = shared.reads

    def get_batch(self, bid: str) -> BatchRecord:
        t.check_id(t.BATCH_PREFIX, bid)
        # The history after the status: see ``history`` for why the order matters.
        names = ("submission", "status", h.NODE, "status-report", "lock", APPROVAL)
        paths = [t.batch_node(bid, n) for n in names]
        got = self.reads.get_many(paths)
        status = got[paths[1]]
        if status is None:
            raise NotFound(f"batch {bid} does not exist")
        (acquired,) = self.reads.exists_many([t.batch_states(bid)])
        return batch_record(
            bid,
            got[paths[0]],
            status,
            got[paths[3]],
            acquired,
            got[paths[4]],
            history=got[paths[2]],
            approval=got[paths[5]],
        )

    def find_batch_by_uuid(self, uuid: str) -> str | None:
        got = self.reads.get_many([t.batch_uuid_path(uuid)])[t.batch_uuid_path(uuid)]
        return t.decode_str(got[0]) if got else None

    def batch_submissions(self, bids: Iterable[str]) -> dict[str, dict | None]:
        """The submission of each batch, in one pipelined round; None when missing."""
        bids = list(bids)
        got = self.reads.get_many(t.batch_node(b, "submission") for b in bids)
        return {
            b: t.decode_json(node[0]) if (node := got[t.batch_node(b, "submission")]) else None
            for b in bids
        }

    def list_batch_ids(self) -> list[str]:
        return sorted(c for c in self.reads.children(t.BATCHES) if t.is_batch_id(c))

    def batch_statuses(self, bids: Iterable[str] | None = None) -> dict[str, dict]:
        """Status JSON of many batches in one pipelined round (missing ones left out)."""
        bids = list(self.list_batch_ids() if bids is None else bids)
        got = self.reads.get_many(t.batch_node(b, "status") for b in bids)
        return {
            b: t.decode_json(node[0]) or {}
            for b in bids
            if (node := got[t.batch_node(b, "status")])
        }

    def pending_batches(self) -> list[str]:
        """Pending batches, oldest first."""
        return [
            b for b, st in self.batch_statuses().items() if st.get("status") == BatchStatus.PENDING
        ]

    def finished_batches(self, status: str = BatchStatus.PROCESSING) -> list[str]:
        """Batches in ``status`` whose ``batch-processing`` directory exists and is empty."""
        bids = [b for b, st in self.batch_statuses().items() if st.get("status") == status]
        dirs = self.reads.children_many(t.batch_job_dir(b, "batch-processing") for b in bids)
        return [b for b in bids if dirs[t.batch_job_dir(b, "batch-processing")] == []]

    def batch_is_finished(self, bid: str) -> bool:
        path = t.batch_job_dir(bid, "batch-processing")
        return self.reads.children_many([path])[path] == []

    def finished_batch_status(self, bid: str) -> str | None:
        """The batch's status when none of its jobs is still processing, else None: the
        processing directory's stat and the status in one round, as a worker asks after
        each job's last step. The stat counts the jobs left; a listing would carry all their
        names, a big batch's whole list again for each of its jobs."""
        processing, status = t.batch_job_dir(bid, "batch-processing"), t.batch_node(bid, "status")
        directory, node = self.reads.read([(mr.GET, processing), (mr.GET, status)])
        if directory is None or directory[1].numChildren or node is None:
            return None
        return (t.decode_json(node[0]) or {}).get("status")

    def batch_jobs(self, bid: str) -> dict[str, list[str]]:
        """Job ids by batch directory (``batch-processing``, ``batch-completed``, ...)."""
        got = self.reads.children_many(t.batch_job_dir(bid, d) for d in BATCH_JOB_DIRS)
        return {d: sorted(got[t.batch_job_dir(bid, d)] or []) for d in BATCH_JOB_DIRS}
