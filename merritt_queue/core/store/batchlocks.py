"""A worker taking a batch: the oldest of a status, locked and re-read, or moved on.

Guarantee: a batch is locked by one session at a time and re-read under the lock; one no
longer in the status asked for is let go. A Pending batch of a collection on hold goes to
Held instead of to work.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import tree as t
from ..errors import ChangedUnderYou, NotFound
from ..records import BatchRecord, evolve
from ..states import BatchStatus
from .batches import Batches
from .batchmoves import BatchMoves, states_op
from .holds import Holds
from .shared import Shared


class BatchLocks:
    """Acquiring, locking and unlocking batches."""

    def __init__(self, shared: Shared, batches: Batches, batch_moves: BatchMoves, holds: Holds):
        self.engine = shared.engine
        self.session = shared.session
        self.batches = batches
        self.batch_moves = batch_moves
        self.holds = holds

    def acquire_pending_batch(self) -> BatchRecord | None:
        """Lock the oldest unlocked Pending batch and move it to Processing (FIFO).

        A batch of a collection on hold moves to Held instead (and is unlocked),
        and the next one is tried. Pending is read from the status, not from
        the absence of ``states``: a batch whose job creation was interrupted
        may already have it.
        """
        for bid in self.batches.pending_batches():
            batch = self.begin_batch(bid)
            if batch is None:
                continue
            try:
                return self.batch_moves.move(
                    batch,
                    BatchStatus.PROCESSING,
                    "",
                    release_lock=False,
                    extra=[states_op(bid)],
                )
            except ChangedUnderYou:
                self.session.unlock(t.batch_node(bid, "lock"))
        return None

    def begin_batch(
        self, bid: str, runs: Callable[[dict | None], bool] | None = None
    ) -> BatchRecord | None:
        """Lock a Pending batch to turn it into jobs; None when busy, gone or no longer Pending.

        A batch of a collection on hold is moved to Held (and unlocked) instead, unless
        ``runs`` says its submission is not ours to run: then it comes back locked and
        untouched, for the caller to let go.
        """
        if not self.session.try_lock(t.batch_node(bid, "lock")):
            return None
        batch = self._reread_locked(bid, BatchStatus.PENDING)
        if batch is None:
            return None
        if (runs is None or runs(batch.submission)) and (
            msg := self.holds.item_hold(batch.submission)
        ):
            self.batch_moves.transition_batch(batch, BatchStatus.HELD, msg, release_lock=True)
            return None
        return batch

    def acquire_batch(self, status: str) -> BatchRecord | None:
        """Lock the oldest unlocked batch in ``status`` (for handlers of that state)."""
        for bid, st in self.batches.batch_statuses().items():
            if st.get("status") != status or not self.session.try_lock(t.batch_node(bid, "lock")):
                continue
            batch = self._reread_locked(bid, status)
            if batch:
                return batch
        return None

    def acquire_batch_for_reporting(self) -> BatchRecord | None:
        """Lock a Processing batch whose jobs are all finished and move it to Reporting."""
        for bid in self.batches.finished_batches(BatchStatus.PROCESSING):
            if not self.session.try_lock(t.batch_node(bid, "lock")):
                continue
            batch = self._reread_locked(bid, BatchStatus.PROCESSING)
            if batch is None:
                continue
            if not self.batches.batch_is_finished(bid):
                self.unlock_batch(batch)
                continue
            try:
                return self.batch_moves.move(batch, BatchStatus.REPORTING, "", release_lock=False)
            except ChangedUnderYou:
                self.unlock_batch(batch)
        return None

    def _reread_locked(self, bid: str, status: str) -> BatchRecord | None:
        try:
            batch = evolve(self.batches.get_batch(bid), lock_session=self.session.session_id)
        except NotFound:
            batch = None
        if batch is None or batch.status != status:
            self.session.unlock(t.batch_node(bid, "lock"))
            return None
        return batch

    def lock_batch(self, bid: str) -> BatchRecord | None:
        if not self.session.try_lock(t.batch_node(bid, "lock")):
            return None
        return evolve(
            self.batches.get_batch(bid), locked=True, lock_session=self.session.session_id
        )

    def unlock_batch(self, batch: BatchRecord | str) -> None:
        bid = batch if isinstance(batch, str) else batch.bid
        self.session.unlock(t.batch_node(bid, "lock"))
