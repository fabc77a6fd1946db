"""The record of locks over time (``jobs.LockSpan``), written where the mirror stores its
snapshot of the lock nodes (``mirror.locks``: the lock directories' refresh and the full
rebuild), by comparing the snapshot with the spans still open: a lock not open yet opens a
span, one still there moves its ``last_seen_at``, an open one the snapshot no longer has is
closed at this read. Spans gone longer than ``RETENTION`` are deleted by the same call,
so the record stays bounded whatever the churn of job and batch locks."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from jobs.models import LockSpan

from .sql import DB_BATCH

RETENTION = timedelta(days=90)


def record(entries: list[dict], at: datetime, under: str = "") -> None:
    """Bring the spans in line with ``entries`` (``mirror.locks._lock_entry``), a snapshot
    read at ``at`` of the locks whose paths start with ``under`` (all of them: ""); open
    spans elsewhere were not read and are left as they are."""
    seen = {(e["path"], datetime.fromisoformat(e["ctime"])): e for e in entries}
    with transaction.atomic():
        open_spans = LockSpan.objects.filter(gone_seen_at=None, path__startswith=under)
        rows = open_spans.values_list("pk", "path", "taken_at")
        known = {(path, taken): pk for pk, path, taken in rows}
        still = [pk for key, pk in known.items() if key in seen]
        gone = [pk for key, pk in known.items() if key not in seen]
        LockSpan.objects.filter(pk__in=still).update(last_seen_at=at)
        LockSpan.objects.filter(pk__in=gone).update(gone_seen_at=at)
        new = [_span(e, key[1], at) for key, e in seen.items() if key not in known]
        # A span closed and seen again with the same ctime (a read that missed it) stays
        # closed: the unique path and ctime would refuse it twice.
        LockSpan.objects.bulk_create(new, batch_size=DB_BATCH, ignore_conflicts=True)
        LockSpan.objects.filter(gone_seen_at__lt=at - RETENTION).delete()


def _span(entry: dict, taken: datetime, at: datetime) -> LockSpan:
    return LockSpan(
        path=entry["path"][:400],
        kind=entry["kind"][:20],
        name=entry["name"][:300],
        owner=entry.get("owner", "")[:30],
        data=entry.get("data", "")[:200],
        taken_at=taken,
        first_seen_at=at,
        last_seen_at=at,
    )
