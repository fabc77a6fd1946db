"""The record of an item's status writes, kept in ZooKeeper beside its status node.

ZooKeeper keeps only a job's or batch's last status. So that the history this
project writes survives the loss of the mirror, every status write made here
also rewrites a ``history`` child (``/jobs/JID/history``, ``/batches/BID/history``)
in the same multi: one entry per status version, with the state it left, the
message, the retry count and who made it.

Why this shape:

- One node, rewritten whole, not a child per entry: a full rebuild reads one
  node per item instead of listing and reading dozens.
- It needs no lock or version check of its own. Every writer of it writes the
  status node in the same multi, checked on the version it read, and reads the
  status before the history (one session sees its reads in order), so a history
  it read can only be older than its status read if the multi is then refused.
- Bounded: at most ``MAX_ENTRIES`` entries and ``MAX_BYTES`` bytes, the oldest
  dropped first and counted in ``dropped``; messages are cut to ``MAX_MESSAGE``.
- MerrittZK never reads it, and removes it with the item (its deletes are
  recursive); a write by Merritt's ingest simply leaves no entry, and the mirror
  calls that status version another writer's.
- Decoding never raises: a damaged node reads as an empty history (``damaged``),
  for check_tree to report, and the next write starts it afresh.

Pure: no client and no I/O, like ``tree``.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

NODE = "history"
FORMAT = 1
MAX_ENTRIES = 100
MAX_BYTES = 32 * 1024
MAX_MESSAGE = 500
MAX_ACTOR = 150

# Who made a write, as the store's ``actor`` and an entry's ``by`` spell it.
ADMIN_PREFIX = "admin:"
WORKER_PREFIX = "worker "
DISPATCHER_PREFIX = "dispatcher "
SUBMISSION_PREFIX = "submission:"
CLEANUP = "cleanup"
REPAIR = "check_tree --repair"
# A status version with no entry here: no process of this project wrote it.
OTHER_WRITER = "Merritt ingest"
# The mirror's own names for a row whose writer it does not know: seen while following the
# tree (its history could not be read), or found by a full reconcile.
MIRROR_WATCH = "watch"
MIRROR_RECONCILE = "reconcile"


def process_actor(prefix: str) -> str:
    """``worker host:pid`` style: which process made a write, for a step's entries."""
    return f"{prefix}{socket.gethostname()}:{os.getpid()}"


def admin_actor(username: str) -> str:
    return f"{ADMIN_PREFIX}{username}"


def submission_actor(who: str) -> str:
    """A batch's creation: who submitted it (a person, or ``manage.py submit``)."""
    return f"{SUBMISSION_PREFIX}{who}"


@dataclass(frozen=True)
class Entry:
    """One status write: the status version it made and what it wrote."""

    version: int
    from_status: str
    to_status: str
    at: str  # the status record's last_modified, as written
    message: str = ""
    retry_count: int = 0
    by: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "v": self.version,
            "from": self.from_status,
            "to": self.to_status,
            "at": self.at,
            "msg": self.message[:MAX_MESSAGE],
            "retry": self.retry_count,
            "by": self.by[:MAX_ACTOR],
        }

    @cached_property
    def encoded(self) -> bytes:
        """``as_json`` as the node spells it. Kept: every status write rewrites the whole node,
        and its older entries need not be encoded again at each."""
        return _dumps(self.as_json())

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Entry:
        return cls(
            version=int(value["v"]),
            from_status=str(value.get("from") or ""),
            to_status=str(value["to"]),
            at=str(value.get("at") or ""),
            message=str(value.get("msg") or ""),
            retry_count=int(value.get("retry") or 0),
            by=str(value.get("by") or ""),
        )


@dataclass(frozen=True)
class History:
    """An item's history node as read: its entries in version order.

    ``exists`` tells a node that is not there (an item Merritt's ingest created, or
    one from before histories were kept) from an empty one: the next write creates
    it. ``dropped`` counts older entries the bounds let go.
    """

    entries: tuple[Entry, ...] = ()
    exists: bool = False
    dropped: int = 0
    damaged: bool = False
    by_version: dict[int, Entry] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.by_version.update((e.version, e) for e in self.entries)

    def get(self, version: int) -> Entry | None:
        return self.by_version.get(version)

    def last_version(self) -> int:
        return self.entries[-1].version if self.entries else -1


ABSENT = History()


def decode(data: bytes | None, exists: bool = True) -> History:
    """The history in ``data`` (a node's bytes); never raises (see the module)."""
    if not exists:
        return ABSENT
    if not data:
        return History(exists=True)
    try:
        value = json.loads(data.decode())
        entries = sorted(
            (Entry.from_json(e) for e in value.get("entries", ())), key=lambda e: e.version
        )
        return History(tuple(entries), exists=True, dropped=max(int(value.get("dropped", 0)), 0))
    except (ValueError, TypeError, KeyError, AttributeError):
        return History(exists=True, damaged=True)


def encode(history: History) -> bytes:
    return _encode(list(history.entries), history.dropped)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _encode(entries: list[Entry], dropped: int) -> bytes:
    """The node's bytes: exactly ``_dumps`` of the whole object, built from the entries'
    own encodings."""
    head = b'{"format":%d,"dropped":%d,"entries":[' % (FORMAT, dropped)
    return head + b",".join(e.encoded for e in entries) + b"]}"


def append(history: History, entry: Entry) -> tuple[History, bytes]:
    """``history`` with ``entry`` added, within the bounds, and its node's bytes.

    An entry at or below the last version kept is a stale read's: it replaces
    nothing and is not added twice (the multi carrying it is refused anyway).
    """
    kept = [e for e in history.entries if e.version < entry.version]
    kept.append(entry)
    dropped = history.dropped
    if len(kept) > MAX_ENTRIES:
        dropped += len(kept) - MAX_ENTRIES
        kept = kept[-MAX_ENTRIES:]
    data = _encode(kept, dropped)
    while len(data) > MAX_BYTES and len(kept) > 1:
        cut = max(1, len(kept) // 4)
        kept, dropped = kept[cut:], dropped + cut
        data = _encode(kept, dropped)
    return History(tuple(kept), exists=True, dropped=dropped), data
