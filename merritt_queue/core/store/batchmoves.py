"""Batch moves between states, and the report a batch's move writes.

Guarantee: a move writes the status at the version read, with its history entry and the
nodes MerrittZK reads (``batch_sides``), in one multi: all or nothing, and of two
writers racing from the same version exactly one wins (``ChangedUnderYou``).
"""

from __future__ import annotations

from .. import batch_sides
from .. import history as h
from .. import tree as t
from ..errors import InvalidTransition, QueueError
from ..records import BatchRecord, Op, OpKind, evolve
from ..states import BATCH, BatchStatus
from .batches import Batches
from .historywrites import History
from .shared import Shared

# Job ids kept in a status report: about 3.3 KB, however big the batch.
STATUS_REPORT_MAX_JIDS = 200


def _acquired_after(batch: BatchRecord, extra: list[Op]) -> bool:
    """Whether the batch has ``states`` once ``extra`` is written with its move."""
    for op in extra:
        if op.path == t.batch_states(batch.bid):
            return op.kind == OpKind.CREATE
    return batch.acquired


def states_op(bid: str) -> Op:
    return Op(OpKind.CREATE, t.batch_states(bid), tolerant=True)


class BatchMoves:
    """Moves and notes of batches."""

    def __init__(self, shared: Shared, batches: Batches, history: History):
        self.engine = shared.engine
        self.reads = shared.reads
        self.changes = shared.changes
        self.session = shared.session
        self.batches = batches
        self.history = history

    def transition_batch(
        self,
        batch: BatchRecord | str,
        new: str,
        message: str = "",
        *,
        release_lock: bool = False,
        release_after: float = 0.0,
    ) -> BatchRecord:
        """Move a batch; the nodes MerrittZK reads go with the move (``batch_sides``).

        ``release_lock``: this session lets go of the batch's lock with the move, deleted in
        its multi, or ``release_after`` seconds later (the multi then checks the lock). Either
        way the moved record has it released, since nobody works on the batch meanwhile: the
        lock only keeps out a reader that acts on what it read before the move.
        """
        if isinstance(batch, str):
            batch = self.batches.get_batch(batch)
        BATCH.check_move(batch.status, new, f"batch {batch.bid}")
        if batch.awaiting_approval:
            raise InvalidTransition(
                f"batch {batch.bid} awaits approval: approve or reject it (the depositor is "
                "told either way); it is not released or deleted by hand"
            )
        extra = batch_sides.move_ops(self.reads, self.session.session_id, batch, new)
        try:
            return self.move(
                batch,
                new,
                message,
                release_lock=release_lock,
                release_after=release_after,
                extra=extra,
            )
        except QueueError as e:
            if new != BatchStatus.HELD:
                raise
            raise batch_sides.explain_hold(self.reads, batch.bid, e) from None

    def move(
        self,
        batch: BatchRecord,
        new: str,
        message: str,
        *,
        release_lock: bool,
        release_after: float = 0.0,
        extra: list[Op] | None = None,
    ) -> BatchRecord:
        what = f"batch {batch.bid}"
        if new != batch.status:  # the same status: a note (``note_batch``), not a move
            BATCH.check_move(batch.status, new, what)
        record = t.batch_status_record(new, message)
        old = self.history.of(t.batch_node(batch.bid, h.NODE), batch.history)
        history_op, history = self.history.batch_op(
            batch.bid, old, batch.status_version + 1, batch.status, record
        )
        ops = [
            Op(
                OpKind.SET,
                t.batch_node(batch.bid, "status"),
                t.encode_json(record),
                batch.status_version,
            ),
            history_op,
        ]
        ops += extra or []
        lock = t.batch_node(batch.bid, "lock")
        later = release_lock and release_after > 0
        if release_lock:
            self.session.check(batch, what)
            ops.append(Op(OpKind.CHECK, lock) if later else Op(OpKind.DELETE, lock))
        results = self.engine.commit(ops, what)
        moved = evolve(
            batch,
            status=new,
            message=record["message"],
            last_modified=record["last_modified"],
            status_version=results[0].version,
            acquired=_acquired_after(batch, extra or []),
            locked=batch.locked and not release_lock,
            lock_session=None if release_lock else batch.lock_session,
            history=history,
        )
        self.changes.changed("batch", batch.bid, batch.status, moved)
        if later:
            self.session.unlock_after(lock, release_after)
        return moved

    def note_batch(self, batch: BatchRecord, message: str) -> BatchRecord:
        """Replace the message of a batch that stays where it is (a Held batch a person keeps
        Held): not a move, but written like one, checked on the status version read."""
        return self.move(batch, batch.status, message, release_lock=False)

    def hold_batch(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.HELD, message)

    def release_batch(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.PENDING, message)

    def delete_batch(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.DELETED, message)

    def update_reporting(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.UPDATE_REPORTING, message)

    def start_processing(
        self, batch: BatchRecord, message: str = "", *, jobs_written: bool = False
    ) -> BatchRecord:
        """Pending -> Processing once every job exists: creates ``states``, drops the lock.

        A reserved batch has ``states`` already, and so has one whose jobs were written (their
        references live under it): creating it again would cost a refused multi and a retry.
        """
        if jobs_written:
            batch = evolve(batch, acquired=True)
        return self.move(
            batch,
            BatchStatus.PROCESSING,
            message,
            release_lock=True,
            extra=[] if batch.acquired else [states_op(batch.bid)],
        )

    def write_status_report(self, bid: str, failed: list[str], successful: list[str]) -> dict:
        """Write ``/batches/BID/status-report``, its job lists cut to a bounded size.

        Whole lists grow about 16 bytes a job: a batch of some 60,000 jobs would pass
        ZooKeeper's 1 MB node limit and could never be reported. The lists keep at most
        ``STATUS_REPORT_MAX_JIDS`` ids (failed ones first); ``failed_count`` and
        ``successful_count`` give the totals, and the batch's ``states/batch-*``
        directories hold every id.
        """
        kept_failed = failed[:STATUS_REPORT_MAX_JIDS]
        kept_successful = successful[: STATUS_REPORT_MAX_JIDS - len(kept_failed)]
        report = {
            "last_modified": t.now(),
            "failed_jobs": kept_failed,
            "successful_jobs": kept_successful,
            "failed_count": len(failed),
            "successful_count": len(successful),
        }
        self.engine.put(t.batch_node(bid, "status-report"), t.encode_json(report), f"batch {bid}")
        self.changes.changed("batch", bid, None)
        return report
