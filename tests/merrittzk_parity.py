"""What MerrittZK offers and the queue itself never calls, kept as functions over a store
for the conformance tests (test_merrittzk_conformance.py) that compare the two."""

from __future__ import annotations

from merritt_queue.core.states import REMOVABLE
from merritt_queue.core.store import QueueStore


def removable_batches(store: QueueStore) -> list[str]:
    """MerrittZK's ``Batch.delete_completed_batches`` selection: every removable batch."""
    return [b for b, st in store.batches.batch_statuses().items() if st.get("status") in REMOVABLE]
