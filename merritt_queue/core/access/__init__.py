"""Merritt's access (assembly) queue, beside the ingest queue: read and steered, never
worked here (Merritt's access service works it). See docs/access-queue.md."""

from .paths import (
    DELETE_FROM,
    PAUSE_LOCKS,
    QUEUES,
    REMOVABLE,
    REQUEUE_FROM,
    AccessStatus,
    item_path,
    key,
    split_key,
)
from .reads import list_all, paused, read_item, read_items, read_queues, unknown_entries
from .records import AccessItem
from .writes import Removal, Written, delete, pause, removable, remove_finished, requeue, unpause

__all__ = [
    "DELETE_FROM",
    "PAUSE_LOCKS",
    "QUEUES",
    "REMOVABLE",
    "REQUEUE_FROM",
    "AccessItem",
    "AccessStatus",
    "Removal",
    "Written",
    "delete",
    "item_path",
    "key",
    "list_all",
    "pause",
    "paused",
    "read_item",
    "read_items",
    "read_queues",
    "removable",
    "remove_finished",
    "requeue",
    "split_key",
    "unknown_entries",
    "unpause",
]
