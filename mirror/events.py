"""Writing timeline rows (``JobEvent``, ``BatchEvent``): one per item and status version.

Which rows to write is ``timeline``'s; here they are written in one statement per
call, by these rules, whatever order the writers come in:

- Nothing duplicates: a row for an (item, version) already there is kept,
- except that an exact row replaces an inexact one (a watcher's view of a write,
  then the write's own record); an exact row is never replaced.

One statement does both (``sql.insert_keeping_exact``). Then each listener (``listen``) is
called with the rows, in the same transaction: the depositors' notifications are recorded
there (the notifications app registers itself, so the mirror imports no app).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models

from batches.models import BatchEvent
from jobs.models import JobEvent

from .rows import _timestamp
from .sql import insert_keeping_exact
from .timeline import Row


@dataclass(frozen=True)
class EventKind:
    model: type[models.Model]
    key: str  # the item's id column


JOB_EVENTS = EventKind(JobEvent, "jid")
BATCH_EVENTS = EventKind(BatchEvent, "bid")


def values(kind: EventKind, record, row: Row, at: datetime) -> dict[str, Any]:
    """The column values of ``row`` of ``record``'s item; ``at`` when its time does not
    parse (written by another tool)."""
    out = {
        kind.key: getattr(record, kind.key),
        "from_status": row.from_status,
        "to_status": row.to_status,
        "at": _timestamp(row.at) or at,
        "message": row.message,
        "actor": row.actor,
        "status_version": row.version,
        "exact": row.exact,
    }
    if kind is JOB_EVENTS:
        out["bid"] = record.bid or ""
        out["retry_count"] = row.retry_count
    return out


def last_known(kind: EventKind, ids: list[str]) -> dict[str, tuple[int, str]]:
    """The newest (status version, status) of each item's rows, for items with no mirror
    row (just created, or the row was lost): their timeline goes on from there."""
    last: dict[str, tuple[int, str]] = {}
    if not ids:
        return last
    found = kind.model._default_manager.filter(**{f"{kind.key}__in": ids}).values_list(
        kind.key, "status_version", "to_status"
    )
    for item_id, version, status in found:
        if item_id not in last or version > last[item_id][0]:
            last[item_id] = (version, status)
    return last


Listener = Callable[[str, list[dict[str, Any]]], None]
_listeners: list[Listener] = []


def listen(listener: Listener) -> None:
    """Call ``listener("job" | "batch", rows)`` after each write of timeline rows (rows an
    earlier write already made come again: a listener keeps its own record of what it saw)."""
    if listener not in _listeners:
        _listeners.append(listener)


def write(kind: EventKind, rows: list[dict[str, Any]]) -> None:
    """Write rows (``values``) by the module's rules; in the caller's transaction."""
    insert_keeping_exact(kind.model, kind.key, rows)
    if rows:
        name = "job" if kind is JOB_EVENTS else "batch"
        for listener in _listeners:
            listener(name, rows)
