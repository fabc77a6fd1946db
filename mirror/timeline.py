"""An item's timeline rows: what the mirror may say about each of its status versions.

Pure: given a job's or batch's record (with the ``history`` node as read, or None
when it was not read), what the mirror last knew of the item and who to name for a
row only seen, it says which ``JobEvent``/``BatchEvent`` rows to write. Writing
them is ``events``'.

The rules, so that no timing between worker, watch and full rebuild can make a
step that never happened:

- A status version with a history entry gets that entry's row, exact: its writer
  recorded the state it left, the message, the retry count and who it was.
- The record's own version without an entry: when the history was read (even
  absent), no process of this project wrote it, so the row is Merritt's ingest's.
  It is exact only if the state before it is known, from the version just below
  (the mirror's last known one, or an entry's ``to_status``; version 0 is a
  creation, with nothing before it). Otherwise it is a jump, ``from_status`` ""
  and a message saying how many writes went unseen: the states between are never
  guessed. When the history was not read (or is damaged), the writer is unknown:
  the row is ``actor``'s, and never exact.
- Versions between with no entry get no row: the next row covers them (an entry's
  ``from_status`` is the real state it left, whoever wrote it).
- Rows only ever go up to the record's version: a history read after the status
  may hold newer entries, which the next read of the item brings with its status.
"""

from __future__ import annotations

from dataclasses import dataclass

from merritt_queue.core.history import MAX_ACTOR, MAX_MESSAGE, OTHER_WRITER, Entry
from merritt_queue.core.records import BatchRecord, JobRecord


@dataclass(frozen=True)
class Row:
    """One event row: ``at`` as the status record spells it (the caller parses it)."""

    version: int
    from_status: str
    to_status: str
    at: str
    message: str
    retry_count: int
    actor: str
    exact: bool


def jump_message(unseen: int, status: str, message: str = "") -> str:
    text = f"{unseen} changes not observed; now {status}"
    return f"{text}: {message}" if message else text


def own_message(row_message: str, status: str) -> str:
    """A jump row's message without the jump's own words (pages tell the jump apart)."""
    head, sep, rest = row_message.partition(f" changes not observed; now {status}")
    if not sep or not head.isdigit():
        return row_message
    return rest.removeprefix(": ")


def _row(version, before, record, actor, exact, message=None) -> Row:
    return Row(
        version=version,
        from_status=before,
        to_status=record.status,
        at=record.last_modified,
        message=(record.message if message is None else message)[:MAX_MESSAGE],
        retry_count=max(getattr(record, "retry_count", 0), 0),
        actor=actor[:MAX_ACTOR],
        exact=exact,
    )


def of_entry(entry: Entry) -> Row:
    return Row(
        version=entry.version,
        from_status=entry.from_status,
        to_status=entry.to_status,
        at=entry.at,
        message=entry.message[:MAX_MESSAGE],
        retry_count=max(entry.retry_count, 0),
        actor=entry.by[:MAX_ACTOR],
        exact=True,
    )


def told(record: JobRecord | BatchRecord, before: str, actor: str) -> Row:
    """The row of a write its writer told the mirror of (write-through): exact.

    The entry the writer put in the history node when the record carries it, so that
    a rebuild from the node gives the very same row; else what the writer told.
    """
    history = record.history
    entry = history.get(record.status_version) if history is not None else None
    if entry is not None:
        return of_entry(entry)
    return _row(record.status_version, before, record, actor, True)


def rows(record: JobRecord | BatchRecord, last: tuple[int, str] | None, actor: str) -> list[Row]:
    """The rows of ``record``'s status versions after ``last`` (the mirror's last known
    ``(status_version, status)`` of the item, or None), in version order."""
    version = record.status_version
    floor = last[0] if last is not None else -1
    if version <= floor:
        return []
    known: dict[int, str] = {-1: ""}  # version -> the status it made; -1: before creation
    if last is not None:
        known[last[0]] = last[1]
    history = record.history
    read = history is not None and not history.damaged
    out: list[Row] = []
    if read:
        assert history is not None
        for entry in history.entries:
            if entry.version > version:
                break
            known[entry.version] = entry.to_status
            if entry.version > floor:
                out.append(of_entry(entry))
        if history.get(version) is not None:
            return out
    writer = OTHER_WRITER if read else actor
    before = known.get(version - 1)
    if before is not None:
        out.append(_row(version, before, record, writer, read))
        return out
    seen = max(v for v in known if v < version)
    message = jump_message(version - seen, record.status, record.message)
    out.append(_row(version, "", record, writer, False, message))
    return out
