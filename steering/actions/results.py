"""What an admin action did to each item: its result, and the message its writes carry.
Apart from ``steering.actions.catalog`` so that the modules of its actions can use them too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from merritt_queue.core.errors import QueueError


@dataclass(frozen=True)
class Applied:
    """What an action did to one item: the item's record after it (when there is one record
    to show) and a note for the audit trail."""

    after: Any = None
    detail: str = ""
    # Items acted on with this one, each ``(before, after)`` record: a batch's jobs deleted
    # with it. Each gets its own audit row.
    along: tuple = ()


class PartlyDone(QueueError):
    """The action failed on its item after acting on some items with it (a batch delete
    whose jobs were only partly deleted): the failure and what was done are both recorded."""

    def __init__(self, message: str, along: Sequence = ()):
        super().__init__(message)
        self.along = tuple(along)


# Each item's result: applied, or the queue's refusal (``ChangedUnderYou``: skipped).
ItemResult = Applied | QueueError


def note_of(user_note: str, what: str) -> str:
    return f"{what} by {user_note}"


def done_or_already(changed: bool) -> Applied:
    return Applied(None, "done" if changed else "already so")
