"""A person's decision on a batch awaiting approval (``core.approval``).

Guarantee: approving (Held -> Pending) or rejecting (Held -> Deleted) is one multi that writes
the status at the version read, its history entry, the nodes MerrittZK reads
(``batch_sides``) and deletes the ``approval`` node: of two operators deciding at once one
wins, the other gets ``ChangedUnderYou`` and nothing is written. A batch that awaits no
approval is refused with why.
"""

from __future__ import annotations

from .. import approval as ap
from .. import batch_sides
from ..errors import InvalidTransition
from ..records import BatchRecord, Op, OpKind, evolve
from ..states import BatchStatus
from .batches import Batches
from .batchmoves import BatchMoves
from .shared import Shared


class Approvals:
    """Approving and rejecting awaiting batches."""

    def __init__(self, shared: Shared, batches: Batches, batch_moves: BatchMoves):
        self.reads = shared.reads
        self.session = shared.session
        self.batches = batches
        self.batch_moves = batch_moves

    def approve(self, batch: BatchRecord | str, message: str) -> BatchRecord:
        """Pending, as an un-approved batch starts: the dispatcher (and any collection hold
        or queue pause) takes it from there."""
        batch = self._awaiting(batch, "approved")
        extra = batch_sides.release_ops(self.reads, batch)
        return self._decide(batch, BatchStatus.PENDING, message, extra)

    def reject(self, batch: BatchRecord | str, message: str) -> BatchRecord:
        """Deleted, with the tombstone any deleted batch gets, so Merritt's cleanup removes it."""
        batch = self._awaiting(batch, "rejected")
        extra = batch_sides.delete_ops(self.reads, self.session.session_id, batch)
        return self._decide(batch, BatchStatus.DELETED, message, extra)

    def awaiting(self) -> list[BatchRecord]:
        """The batches awaiting approval, oldest first (every Held batch read whole)."""
        held = [
            bid
            for bid, st in self.batches.batch_statuses().items()
            if st.get("status") == BatchStatus.HELD
        ]
        found = self.reads.exists_many([ap.path(bid) for bid in held])
        return [self.batches.get_batch(bid) for bid, stat in zip(held, found, strict=True) if stat]

    def _awaiting(self, batch: BatchRecord | str, what: str) -> BatchRecord:
        if isinstance(batch, str):
            batch = self.batches.get_batch(batch)
        if not batch.awaiting_approval:
            raise InvalidTransition(
                f"batch {batch.bid} was not {what}: it is {batch.status} and awaits no "
                "approval (only a batch of a profile that asks for approval, still Held since "
                "it arrived, does)"
            )
        return batch

    def _decide(self, batch: BatchRecord, new: str, message: str, extra: list[Op]) -> BatchRecord:
        extra = [*extra, Op(OpKind.DELETE, ap.path(batch.bid))]
        moved = self.batch_moves.move(batch, new, message, release_lock=False, extra=extra)
        return evolve(moved, approval=None)
