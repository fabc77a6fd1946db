"""A collection's held items, released or kept Held on a person's word.

A collection hold moves the Pending jobs and batches of its collection to Held, with
``item_hold``'s message ("collection demo is on hold"): these are what the hold *caught*. The
dispatcher moves them back once no hold covers them (``follow_collection_holds``), at its next
sweep; a person lifting the hold releases them in the same step instead, or keeps them Held
on purpose. A kept item's message then says who kept it, so no sweep takes it for a caught
one any more. "Release all held items" also releases those a person held one by one.

Each item is its own write, checked on the status version read; one that moved meanwhile is
left, with why, and the others go on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..errors import NotFound, QueueError
from ..records import BatchRecord, JobRecord, ReleaseResult
from ..states import BatchStatus, JobStatus
from .holds import Holds, held_by_a_hold

if TYPE_CHECKING:
    from . import QueueStore


class HeldItems(Holds):
    """Held items of a collection, for ``QueueStore``."""

    def held_items(
        self, mnemonic: str, *, by_hold_only: bool = False
    ) -> list[BatchRecord | JobRecord]:
        """The collection's Held batches, then its Held jobs, whichever side wrote them (an
        item names its collection, or only its profile: Merritt's); with ``by_hold_only``,
        only those a collection hold caught."""
        store = cast("QueueStore", self)  # the records are read by other parts of it
        held = [
            bid for bid, st in self.batch_statuses().items() if st.get("status") == BatchStatus.HELD
        ]
        items: list[BatchRecord | JobRecord] = []
        for bid in held:
            try:
                items.append(store.get_batch(bid))
            except NotFound:  # removed meanwhile
                continue
        for _, jid in self.jobs_in_state(JobStatus.HELD):
            try:
                items.append(self.get_job(jid))
            except NotFound:
                continue
        return [
            item
            for item in items
            if item.status in (BatchStatus.HELD, JobStatus.HELD)
            and self.item_collection(_data(item)) == mnemonic
            and (not by_hold_only or held_by_a_hold(item.message or ""))
        ]

    def release_collection_items(
        self, mnemonic: str, message: str = "", *, by_hold_only: bool = False
    ) -> ReleaseResult:
        """Release the collection's held items (``held_items``) to Pending, each
        version-checked on the record read."""
        store = cast("QueueStore", self)

        def release(item):
            if isinstance(item, BatchRecord):
                return store.transition_batch(item, BatchStatus.PENDING, message)
            return self.transition_job(item, JobStatus.PENDING, message)

        return self._each(self.held_items(mnemonic, by_hold_only=by_hold_only), release)

    def keep_caught_items(self, mnemonic: str, message: str) -> ReleaseResult:
        """Keep Held the items the collection's hold caught, their message replaced by
        ``message`` (who kept them, and why): ``released`` lists the ones kept."""
        store = cast("QueueStore", self)

        def keep(item):
            if isinstance(item, BatchRecord):
                return store.note_batch(item, message)
            return self.note_job(item, message)

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


def _data(item: BatchRecord | JobRecord) -> dict | None:
    return item.submission if isinstance(item, BatchRecord) else item.configuration
