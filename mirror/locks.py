"""Collections, their holds, and the locks page's data (``MirrorState("locks")``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from batches.models import Collection, Profile
from jobs.models import MirrorState
from merritt_queue.core import tree as t
from merritt_queue.core.itemkeys import holds_by_collection
from merritt_queue.project.profiletable import ProfileTable

from . import lockspans
from .rows import _text
from .sql import DB_BATCH
from .upsert import LOCKS, mark


def sync_collections(holds: dict[str, dict], at: datetime) -> None:
    """Collection rows for every profile's collection and every hold; the held flag.

    Who held, why and when come from the hold's lock node when it records them
    and are otherwise left as they are (an admin feature may have set them).
    """
    known = set(Profile.objects.values_list("collection", flat=True))
    holds = holds_by_collection(holds, ProfileTable(), known)
    names = set(holds) | known
    with transaction.atomic():
        rows = {c.mnemonic: c for c in Collection.objects.all()}
        new = [Collection(mnemonic=n) for n in sorted(names - set(rows))]
        for row in [*rows.values(), *new]:
            _hold_into(row, holds.get(row.mnemonic))
            row.read_at = at
        Collection.objects.bulk_create(new, batch_size=DB_BATCH)
        fields = ["held", "held_by", "held_reason", "held_at", "read_at"]
        Collection.objects.bulk_update(list(rows.values()), fields, batch_size=DB_BATCH)


def apply_collection(mnemonic: str, hold: dict | None) -> None:
    """One collection's hold as just written (None: released)."""
    row, _ = Collection.objects.get_or_create(mnemonic=mnemonic)
    _hold_into(row, hold)
    row.read_at = timezone.now()
    row.save()


def _hold_into(row: Collection, hold: dict | None) -> None:
    row.held = hold is not None
    if hold:
        row.held_by = _text(hold.get("by"))[:150] or row.held_by
        row.held_reason = _text(hold.get("reason")) or row.held_reason
        row.held_at = t.parse_timestamp(_text(hold.get("at"))) or row.held_at


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


_LOCK_KINDS = {"collections": "collection", "jobs": "job", "batches": "batch"}


def _lock_entry(path: str, stat, data: bytes = b"") -> dict[str, Any]:
    """``/locks/<kind>/<name>``, or ``/jobs/JID/lock`` and ``/batches/BID/lock``."""
    top, middle, last = path.strip("/").split("/")
    kind, name = (middle, last) if top == "locks" else (top, middle)
    return {
        "path": path,
        "kind": _LOCK_KINDS.get(kind, kind),
        "name": name,
        "ctime": _when(stat.ctime),
        "owner": f"{stat.ephemeralOwner:#x}" if stat.ephemeralOwner else "",
        "data": data.decode(errors="replace")[:200],
    }


def locks_detail(locks: dict, item_locks: dict, at: datetime) -> dict[str, Any]:
    """The locks page's data: queue pause and every lock, with age and owner session."""
    entries = [_lock_entry(p, node[1], node[0]) for p, node in sorted(locks.items())]
    entries += [_lock_entry(p, stat) for p, stat in sorted(item_locks.items())]
    pause = locks.get(t.LOCK_QUEUE_INGEST)
    return {
        "paused": pause is not None,
        "paused_at": _when(pause[1].ctime) if pause else None,
        "locks": entries,
        "read_at": at.isoformat(),
    }


def refresh_locks(locks: dict, at: datetime) -> None:
    """Update the lock directories' part of the locks page; item locks stay as last read."""
    previous = MirrorState.objects.filter(name=LOCKS).values_list("detail", flat=True).first()
    items = [e for e in (previous or {}).get("locks", []) if e.get("kind") in ("job", "batch")]
    detail = locks_detail(locks, {}, at)
    read = list(detail["locks"])
    detail["locks"] += items
    store_locks(detail, at, read, under=t.LOCKS + "/")


def store_locks(detail: dict, at: datetime, read: list[dict], under: str = "") -> None:
    """The locks' snapshot and, from the entries just ``read`` (those under ``under``),
    the record of locks over time (``mirror.lockspans``): the one place both are written."""
    with transaction.atomic():
        mark(LOCKS, at, detail)
        lockspans.record(read, at, under)
