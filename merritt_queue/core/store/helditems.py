"""A collection's held items, released or kept Held on a person's word.

A collection hold moves the Pending jobs and batches of its collection to Held, with
``item_hold``'s message ("collection demo is on hold"): these are what the hold *caught*. The
dispatcher moves them back once no hold covers them (``follow_collection_holds``), at its next
sweep; a person lifting the hold releases them in the same step instead, or keeps them Held
on purpose. A kept item's message then says who kept it, so no sweep takes it for a caught
one any more. "Release all held items" also releases those a person held one by one.

Guarantee: each item is its own write, checked on the status version read; one that moved
meanwhile is left, with why, and the others go on.
"""

from __future__ import annotations

from ..errors import NotFound, QueueError
from ..records import BatchRecord, JobRecord, ReleaseResult
from ..sides import is_ours
from ..states import BatchStatus, JobStatus
from .batches import Batches
from .batchmoves import BatchMoves
from .holds import Holds, held_by_a_hold
from .jobmoves import JobMoves
from .jobs import Jobs

# The message of an item released because the collection hold that held it was lifted.
HOLD_LIFTED = "released: the collection hold that held it was lifted"


def _data(item: BatchRecord | JobRecord) -> dict | None:
    return item.submission if isinstance(item, BatchRecord) else item.configuration


class HeldItems:
    """Held items of a collection, followed, released or kept."""

    def __init__(
        self,
        batches: Batches,
        jobs: Jobs,
        holds: Holds,
        batch_moves: BatchMoves,
        moves: JobMoves,
    ):
        self.batches = batches
        self.jobs = jobs
        self.holds = holds
        self.batch_moves = batch_moves
        self.moves = moves

    def held_items(
        self, mnemonic: str, *, by_hold_only: bool = False
    ) -> list[BatchRecord | JobRecord]:
        """The collection's Held batches, then its Held jobs, whichever side wrote them (an
        item names its collection, or only its profile: Merritt's); with ``by_hold_only``,
        only those a collection hold caught."""
        held = [
            bid
            for bid, st in self.batches.batch_statuses().items()
            if st.get("status") == BatchStatus.HELD
        ]
        items: list[BatchRecord | JobRecord] = []
        for bid in held:
            try:
                items.append(self.batches.get_batch(bid))
            except NotFound:  # removed meanwhile
                continue
        for _, jid in self.jobs.jobs_in_state(JobStatus.HELD):
            try:
                items.append(self.jobs.get_job(jid))
            except NotFound:
                continue
        return [
            item
            for item in items
            if item.status in (BatchStatus.HELD, JobStatus.HELD)
            and not getattr(item, "awaiting_approval", False)  # a person's decision, not a hold's
            and self.holds.item_collection(_data(item)) == mnemonic
            and (not by_hold_only or held_by_a_hold(item.message or ""))
        ]

    def release_collection_items(
        self, mnemonic: str, message: str = "", *, by_hold_only: bool = False
    ) -> ReleaseResult:
        """Release the collection's held items (``held_items``) to Pending, each
        version-checked on the record read."""

        def release(item):
            if isinstance(item, BatchRecord):
                return self.batch_moves.transition_batch(item, BatchStatus.PENDING, message)
            return self.moves.transition_job(item, JobStatus.PENDING, message)

        return self._each(self.held_items(mnemonic, by_hold_only=by_hold_only), release)

    def keep_caught_items(self, mnemonic: str, message: str) -> ReleaseResult:
        """Keep Held the items the collection's hold caught, their message replaced by
        ``message`` (who kept them, and why): ``released`` lists the ones kept."""

        def keep(item):
            if isinstance(item, BatchRecord):
                return self.batch_moves.note_batch(item, message)
            return self.moves.note_job(item, message)

        return self._each(self.held_items(mnemonic, by_hold_only=True), keep)

    @staticmethod
    def _each(items: list, write) -> ReleaseResult:
        result = ReleaseResult()
        for item in items:
            item_id = item.bid if isinstance(item, BatchRecord) else item.jid
            try:
                after = write(item)
            except QueueError as e:  # moved or locked since it was read: left, with why
                result.skipped[item_id] = str(e)
                continue
            result.released.append(item_id)
            result.moved.append((item, after))
        return result

    def follow_collection_holds(self) -> tuple[list[str], list[str]]:
        """Move batches and jobs with the collection holds, whoever placed or lifted them;
        the ids held and the ids released.

        - A Held batch or job that a collection hold moved to Held (its message is
          ``item_hold``'s) goes back to Pending once no hold covers it: Merritt's admin
          lifting its lock releases what its lock held here. One a person held stays.
        - A Pending batch submitted here that a hold covers is moved to Held at once, with
          the hold's message, as our pickup would. Merritt's own batches are left to its
          ingest, which checks holds on their jobs.

        Each move is its own version-checked multi; one refused (the item moved, or someone
        holds its lock) is left for the next call.
        """
        held_now: list[str] = []
        released: list[str] = []
        statuses = self.batches.batch_statuses()
        by_hold = [
            b
            for b, st in statuses.items()
            if st.get("status") == BatchStatus.HELD and held_by_a_hold(st.get("message") or "")
        ]
        covered = bool(self.holds.held_collections())
        pending = [b for b, st in statuses.items() if st.get("status") == BatchStatus.PENDING]
        submissions = self.batches.batch_submissions(by_hold + (pending if covered else []))
        for bid in by_hold:
            if self.holds.item_hold(submissions[bid]) is None:
                self._follow(
                    released, bid, lambda b: self.batch_moves.release_batch(b, HOLD_LIFTED)
                )
        for bid in pending if covered else []:
            submission = submissions[bid]
            if is_ours(submission) and (why := self.holds.item_hold(submission)):
                self._follow(
                    held_now,
                    bid,
                    lambda b, why=why: self.batch_moves.hold_batch(b, why),
                )
        for _, jid in self.jobs.jobs_in_state(JobStatus.HELD):
            try:
                job = self.jobs.get_job(jid)
            except QueueError:
                continue
            if (
                held_by_a_hold(job.message or "")
                and self.holds.item_hold(job.configuration) is None
            ):
                self._follow(released, jid, lambda j: self.moves.release_job(j, HOLD_LIFTED))
        return held_now, released

    @staticmethod
    def _follow(done: list[str], item_id: str, move) -> None:
        try:
            move(item_id)
        except QueueError:  # moved or locked meanwhile: the next call looks again
            return
        done.append(item_id)
