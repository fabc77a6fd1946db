"""A Failed batch whose status report no longer tells the truth of its jobs, with nobody left
to report it again.

The queue reports a Failed batch again by itself when a resumed job of it completes
(``store.followups``). A worker that died (or lost ZooKeeper) between the job's commit and
that move, or a failed job deleted since the report, leaves the batch Failed with a report
that lists as failed jobs that are failed no more, on every page. The repair is the move
the queue would have made: UpdateReporting, guarded by the batch's status version as read,
so that the reporting step reports it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import tree as t
from ..states import PROCESSING_DIR, BatchStatus
from ..store.followups import FAILED_DIR, report_is_stale
from .merrittchecks import _status_write

if TYPE_CHECKING:
    from ..treeread import _Batch
    from .checker import Checker

KIND = "batch-report-out-of-date"
MESSAGE = (
    "reported again by the queue's check: its report listed as failed jobs that are failed no "
    "more, and none of its jobs is still running"
)


def check_batch(checker: Checker, batch: _Batch) -> None:
    """Find (and plan the repair of) a Failed batch, none of whose jobs runs, whose report is
    out of date. A batch with no report (Merritt's) or jobs still running is left alone:
    the latter is reported when they end (or ``batch-finished-early`` says why not)."""
    node = batch.node("status-report")
    if batch.status != BatchStatus.FAILED or node is None:
        return
    if PROCESSING_DIR not in batch.refs or batch.refs[PROCESSING_DIR]:
        return
    try:
        report = t.decode_json(node[0])
    except ValueError:
        return
    failed = batch.refs.get(FAILED_DIR, [])
    if not isinstance(report, dict) or not report_is_stale(report, failed):
        return
    head = (
        f"Batch {batch.id} is Failed and none of its jobs is running, but its status report "
        f"lists {report.get('failed_count', len(report.get('failed_jobs') or []))} failed job(s) "
        f"where {len(failed)} are failed now: it was not reported again after its jobs changed."
    )
    if batch.node("lock"):
        checker.add(KIND, t.batch_path(batch.id), f"{head} It is locked: only reported.")
        return
    checker.add(
        KIND,
        t.batch_path(batch.id),
        f"{head} The repair moves it to UpdateReporting, so that it is reported again.",
        "set the batch UpdateReporting",
        lambda: _status_write(checker, batch, BatchStatus.UPDATE_REPORTING, MESSAGE),
    )
