"""A reported batch follows its jobs: the queue reports it again once a resume fixed it.

A batch is reported once, when its last job ends. When an operator resumes the failed jobs
of a Failed batch and they complete, the batch's status, message and report still say
Failed; Merritt reports it again only when someone moves it to UpdateReporting
(zk-tree.md: Failed -> UpdateReporting -> Completed | Failed, Merritt's "Report again"). The
queue makes that same move itself when a job of a Failed batch completes, none of the
batch's jobs is still running, and the batch's report no longer tells the truth of its
failed jobs; the reporting step then reports it as it reports any batch.

Guarantee: one move per change. The move is the batch's status write checked on the
version read: of two workers finishing a batch's last two jobs at the same moment, both may
ask, one wins, the other finds the batch moved (``ChangedUnderYou``) and leaves it. The
report written after the move is fresh, so asking again moves nothing.
"""

from __future__ import annotations

from .. import multiread as mr
from .. import tree as t
from ..errors import ChangedUnderYou, NotFound
from ..records import BatchRecord
from ..states import PROCESSING_DIR, BatchStatus
from .batches import Batches
from .batchmoves import BatchMoves
from .shared import Shared

FAILED_DIR = "batch-failed"


def report_is_stale(report: dict | None, failed_now: list[str]) -> bool:
    """Whether a batch's status report no longer lists its failed jobs as they are.

    The report keeps a bounded list and the total (``write_status_report``): it is stale
    when the total differs, or when a job it lists as failed is failed no more. A batch
    with no report (MerrittZK never writes one) is stale once none of its jobs is failed.
    """
    if not report:
        return not failed_now
    listed = [str(j) for j in report.get("failed_jobs") or []]
    total = report.get("failed_count", len(listed))
    return total != len(failed_now) or not set(listed) <= set(failed_now)


def again_message(jid: str, report: dict | None, failed_now: list[str]) -> str:
    """The batch's message for the move: who moved it and why, as its history keeps it."""
    before = (report or {}).get("failed_count", len((report or {}).get("failed_jobs") or []))
    after = f"{len(failed_now)} still failed" if failed_now else "none failed now"
    return (
        f"reported again by the queue: job {jid} completed after a resume and none of the "
        f"batch's jobs is still running (the last report listed {before} failed; {after})"
    )


class BatchFollow:
    """Following a batch's jobs."""

    def __init__(self, shared: Shared, batches: Batches, batch_moves: BatchMoves):
        self.reads = shared.reads
        self.batches = batches
        self.batch_moves = batch_moves

    def follow_jobs(self, bid: str, jid: str) -> BatchRecord | None:
        """After job ``jid`` of batch ``bid`` completed: move the batch Failed ->
        UpdateReporting when its report is out of date and none of its jobs runs.

        1. One round reads the batch's status and its ``batch-processing`` stat: most
           batches are not Failed, or still have jobs running, and cost nothing more.
        2. The batch and its failed jobs are read; a report that still tells the truth
           leaves it (a resumed job that failed again changes nothing).
        3. The move, checked on the status version read; a writer that moved the batch
           first wins and None is returned. A job resumed meanwhile only delays the report:
           UpdateReporting is reported once ``batch-processing`` is empty.
        """
        processing = t.batch_job_dir(bid, PROCESSING_DIR)
        directory, node = self.reads.read(
            [(mr.GET, processing), (mr.GET, t.batch_node(bid, "status"))]
        )
        if directory is None or directory[1].numChildren or node is None:
            return None
        if (t.decode_json(node[0]) or {}).get("status") != BatchStatus.FAILED:
            return None
        try:
            batch = self.batches.get_batch(bid)
        except NotFound:  # purged meanwhile
            return None
        failed_now = self.batches.batch_jobs(bid)[FAILED_DIR]
        if batch.status != BatchStatus.FAILED:
            return None
        if not report_is_stale(batch.status_report, failed_now):
            return None
        message = again_message(jid, batch.status_report, failed_now)
        try:
            return self.batch_moves.transition_batch(batch, BatchStatus.UPDATE_REPORTING, message)
        except ChangedUnderYou:  # another worker (or a person) moved it first
            return None
