"""The access queue into the mirror (``access.models``): rows, their history, removals.

Access requests are few, so a queue is read whole (``core.access.read_queues``) when the
follower's watches say it changed, and at every full reconcile; each read request's row is
written, its status versions' events by ``mirror.timeline``'s rules (an entry of the
request's ``history`` node exact; a version no process of ours wrote is Merritt's access
service's), and the rows of a queue read whole whose request is gone are marked
``removed_at``, kept as history like jobs'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from kazoo.client import KazooClient

from access.models import AccessEvent, AccessRequest
from inventory.models import InventoryObject
from merritt_queue.core import access as core
from merritt_queue.core import history
from merritt_queue.core import tree as t

from . import timeline

# Who a status version no process of this project wrote is named after.
OTHER_WRITER = "Merritt access"
FIELDS = (
    "queue", "qid", "status", "status_version", "message", "last_modified",
    "status_changed_at", "created_at", "token", "token_status", "size", "delivery_node",
    "url", "anticipated_availability", "token_data", "ark", "collection", "locked",
    "lock_owner", "problem", "read_at", "removed_at",
)  # fmt: skip


@dataclass
class Applied:
    """What an apply changed, by request key (``small/qid...``)."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def values(item: core.AccessItem, collection: str, now: datetime) -> dict:
    """The row of ``item`` as read at ``now``."""
    return {
        "queue": item.queue,
        "qid": item.qid,
        "status": item.status or "",
        "status_version": item.status_version,
        "message": item.message,
        "last_modified": item.last_modified[:40],
        "status_changed_at": item.status_modified,
        "created_at": item.created,
        "token": item.token_id[:100],
        "token_status": item.token_status[:20],
        "size": item.size,
        "delivery_node": item.delivery_node,
        "url": item.url,
        "anticipated_availability": item.anticipated_availability[:64],
        "token_data": item.token,
        "ark": item.ark[:255],
        "collection": collection,
        "locked": item.locked,
        "lock_owner": f"{item.lock_owner:x}" if item.lock_owner else "",
        "problem": "; ".join(item.problems),
        "read_at": now,
        "removed_at": None,
    }


def refresh(
    client: KazooClient,
    keys: Iterable[str] | None = None,
    *,
    actor: str = history.MIRROR_WATCH,
) -> Applied:
    """Read these requests (``small/qid...``; both queues whole when None) and mirror them:
    what the steering actions call after a write, and the follower after a watch fired."""
    now = timezone.now()
    if keys is None:
        return apply(core.read_queues(client), listed=core.QUEUES, actor=actor, now=now)
    read = core.read_items(client, [core.split_key(k) for k in keys])
    out = apply([i for i in read.values() if i], actor=actor, now=now)
    gone = [k for k, i in read.items() if i is None]
    out.removed += remove(gone, now)
    return out


def apply(
    items: Sequence[core.AccessItem],
    *,
    listed: Sequence[str] = (),
    actor: str = history.MIRROR_WATCH,
    now: datetime | None = None,
) -> Applied:
    """Write the rows and events of ``items``; the rows of the queues in ``listed`` (read
    whole) that are not among them and were read before ``now`` are marked removed."""
    now = now or timezone.now()
    out = Applied()
    collections = _collections({i.ark for i in items if i.ark})
    with transaction.atomic():
        rows = AccessRequest.objects.select_for_update().in_bulk(
            [i.key for i in items], field_name="key"
        )
        for item in items:
            row = rows.get(item.key)
            new = values(item, collections.get(item.ark, ""), now)
            last = (row.status_version, row.status) if row and row.removed_at is None else None
            if row is None:
                AccessRequest.objects.create(key=item.key, **new)
                out.added.append(item.key)
            else:
                if any(getattr(row, f) != new[f] for f in FIELDS if f != "read_at"):
                    out.changed.append(item.key)
                AccessRequest.objects.filter(pk=row.pk).update(**new)
            _events(item, last, actor, now)
        if listed:
            seen = {i.key for i in items}
            live = AccessRequest.objects.filter(
                queue__in=listed, removed_at__isnull=True, read_at__lt=now
            )
            gone = [k for k in live.values_list("key", flat=True) if k not in seen]
            out.removed += remove(gone, now)
    return out


def remove(keys: Sequence[str], now: datetime | None = None) -> list[str]:
    """Mark these requests' rows removed (their nodes are gone); the keys marked."""
    if not keys:
        return []
    live = AccessRequest.objects.filter(key__in=keys, removed_at__isnull=True)
    marked = sorted(live.values_list("key", flat=True))
    live.update(removed_at=now or timezone.now(), locked=False, lock_owner="")
    return marked


def _events(item: core.AccessItem, last, actor: str, now: datetime) -> None:
    if item.status is None:
        return  # nothing MerrittZK could load: no state to record
    existing = {
        e.status_version: e
        for e in AccessEvent.objects.filter(key=item.key, status_version__gt=(last or (-1,))[0])
    }
    # timeline reads a record by these five attributes only; _Record gives them.
    for r in timeline.rows(_Record(item), last, actor):  # type: ignore[arg-type]
        old = existing.get(r.version)
        if old is not None and (old.exact or not r.exact):
            continue
        AccessEvent.objects.update_or_create(
            key=item.key,
            status_version=r.version,
            defaults={
                "from_status": r.from_status,
                "to_status": r.to_status,
                "at": _at(r.at, item, now),
                "message": r.message,
                "actor": OTHER_WRITER if r.actor == history.OTHER_WRITER else r.actor,
                "exact": r.exact,
            },
        )


@dataclass(frozen=True)
class _Record:
    """An access request as ``mirror.timeline`` reads a record."""

    item: core.AccessItem

    @property
    def status(self) -> str:
        return self.item.status or ""

    @property
    def status_version(self) -> int:
        return self.item.status_version

    @property
    def last_modified(self) -> str:
        return self.item.last_modified

    @property
    def message(self) -> str:
        return self.item.message

    @property
    def history(self) -> history.History:
        return self.item.history


def _at(text: str, item: core.AccessItem, now: datetime) -> datetime:
    """A status write's time as its writer spelled it; else the status node's mtime."""
    try:
        return datetime.strptime(text, t.TIMESTAMP_FORMAT)
    except (TypeError, ValueError):
        return item.status_modified or now


def _collections(arks: set[str]) -> dict[str, str]:
    if not arks:
        return {}
    found = InventoryObject.objects.filter(ark__in=arks).values_list("ark", "collection")
    return dict(found)
