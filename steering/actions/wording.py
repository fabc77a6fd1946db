"""What the audit trail says in words: an action's name, whether a cleanup was only a dry
run, a list filter kept as a query string, and what an action did to a collection or to the
queue, where the row has no status before or after to show.

The codes stay in the database and the CSV export (scripts read them); the pages show these.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from steering.actions.catalog import ACTIONS
from steering.actions.kinds import Scope
from steering.maintenance.operations import OPERATIONS
from steering.models import AdminAction, AdminActionItem

WINDOW_WORDS = {
    "window.create": "Schedule a maintenance window",
    "window.cancel": "Cancel a maintenance window",
    "window.start": "Maintenance window began",
    "window.end": "Maintenance window ended",
    "window.reapply": "Maintenance window's hold put back",
    "window.missed": "Maintenance window missed",
}

RUN_WORDS = {
    "run.pause": "Pause a resume run",
    "run.resume": "Resume a paused resume run",
    "run.cancel": "Cancel a resume run",
    "run.stopped": "Resume run stopped itself",
}

# The halves of a two-person deletion besides the deletion itself (``steering.twoperson``).
REQUEST_WORDS = {
    "deletion.request": "Request a deletion (for a second administrator)",
    "deletion.reject": "Reject a deletion request",
    "deletion.withdraw": "Withdraw a deletion request",
}

# What a collection's or the queue's action did, by its detail: done, or already so.
DONE_WORDS = {
    "collection.hold": ("the collection was put on hold", "the collection was already on hold"),
    "collection.release": ("the collection's hold was lifted", "the collection was not on hold"),
    "queue.pause": ("the queue was paused", "the queue was already paused"),
    "queue.resume": ("the queue was resumed", "the queue was not paused"),
}


def action_words(code: str) -> str:
    """``job.edit_resume`` -> "Edit and resume (job)"; an unknown code is shown as it is."""
    if code in ACTIONS:
        action = ACTIONS[code]
        scoped = action.scope in (
            Scope.JOB,
            Scope.BATCH,
            Scope.COLLECTION,
            Scope.ACCESS,
            Scope.ACCESS_QUEUE,
        )
        return f"{action.label} ({action.scope})" if scoped else action.label
    if code in OPERATIONS:
        return OPERATIONS[code].label
    return WINDOW_WORDS.get(code) or RUN_WORDS.get(code) or REQUEST_WORDS.get(code, code)


def is_dry_run(record: AdminAction) -> bool:
    return bool((record.params or {}).get("dry_run"))


def selection_words(selection: str) -> str:
    """A list filter's query string as "status: Failed; collection: demo"."""
    pairs = [(k, v) for k, v in parse_qsl(selection, keep_blank_values=False) if k != "page"]
    return "; ".join(f"{k}: {v}" for k, v in pairs) or "everything listed"


def item_outcome(record: AdminAction, item: AdminActionItem) -> str:
    """In words what happened to an item with no status to show (a collection, the queue);
    "" for the others, whose before and after say it."""
    words = DONE_WORDS.get(record.action)
    # A batch or job a collection's release let go is its own row, with its own move.
    own_move = item.part_of or item.before_status or item.after_status
    if words is None or item.result != "done" or own_move:
        return ""
    first, _, rest = item.detail.partition("; ")
    said = words[1] if first == "already so" else words[0]
    return f"{said}; {rest}" if rest else said
