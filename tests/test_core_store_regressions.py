"""Plain regression tests for bugs the property test (test_core_stateful.py) found in the core."""

from __future__ import annotations

from merritt_queue import tree as t
from merritt_queue.consistency import check_tree


def test_a_batch_moved_to_processing_by_hand_gets_its_states_node(store, zk):
    """transition_batch(Pending -> Processing) used to leave no ``states``: batch-not-acquired."""
    bid = store.create_batch({"batchID": "u-1"}).id
    moved = store.transition_batch(bid, "Processing", "started by hand")
    assert zk.exists(t.batch_states(bid)) and moved.acquired
    assert store.get_batch(bid).acquired
    assert check_tree(store) == []
