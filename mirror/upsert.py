"""Writing rows: the upsert of records, their timeline events and their batches' counts.

The guarantees are the package's (mirror): never backwards, one event per
status write, counts recounted in the same transaction.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from batches.models import Batch
from jobs.models import Job, MirrorState
from merritt_queue.core.errors import NotFound
from merritt_queue.core.store import BatchRecord, JobRecord, QueueStore

from . import events as _events
from . import timeline
from .events import BATCH_EVENTS, JOB_EVENTS
from .rows import BATCHES, JOB_STATUS_FIELDS, JOBS, _Kind, job_values
from .sql import DB_BATCH, insert, select_in, update

WRITE_THROUGH, WATCH, FULL, LOCKS = "write-through", "watch", "full", "locks"


@dataclass
class _Outcome:
    """What an upsert did: ids added and changed, and each written record's previous row."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    previous: dict[str, dict | None] = field(default_factory=dict)
    written: list = field(default_factory=list)  # the records whose rows were written


def _rows(kind: _Kind, ids: list[str]) -> dict[str, dict]:
    fields = ("id", kind.key, "read_at", "removed_at", *kind.fields)
    return {r[kind.key]: r for r in select_in(kind.model, kind.key, ids, fields)}


def _unmark(model, ids: list[int]) -> None:
    """Rows marked removed whose node is read again (a tree restored from a backup)."""
    for chunk in range(0, len(ids), DB_BATCH):
        model._default_manager.filter(id__in=ids[chunk : chunk + DB_BATCH]).update(removed_at=None)


def _stale(record, row: dict, since: datetime | None) -> bool:
    """Whether ``record`` must not overwrite ``row`` (see the module's guarantees)."""
    if since is not None:
        return row["read_at"] >= since
    return record.status_version < row["status_version"]


def _upsert(kind: _Kind, records: list, *, at: datetime, since=None) -> _Outcome:
    """Write the rows of ``records`` that differ; in the caller's transaction.

    Several records of one item (in the order written) make one row write, of the last.
    """
    latest = {getattr(record, kind.key): record for record in records}
    rows = _rows(kind, list(latest))
    out, new, changed, back = _Outcome(), [], [], []
    for key, record in latest.items():
        values, row = kind.values(record), rows.get(key)
        # Only a full rebuild that began after the removal knows the node is there again:
        # a follower's read may have been taken before the removal, at the same version.
        if (
            row is not None
            and row["removed_at"] is not None
            and since is not None
            and not _stale(record, row, since)
        ):
            back.append(row["id"])
        if row is None:
            new.append({kind.key: key, **values, "read_at": at})
            out.added.append(key)
        elif _stale(record, row, since) or all(row[f] == values[f] for f in kind.fields):
            continue
        else:
            changed.append({"id": row["id"], **values, "read_at": at})
            out.changed.append(key)
        out.previous[key] = row
        out.written.append(record)
    insert(kind.model, new)
    update(kind.model, changed, [*kind.fields, "read_at"])
    _unmark(kind.model, back)
    return out


def _write_events(kind: _Kind, outcome: _Outcome, actor: str, at: datetime) -> None:
    """The timeline rows of the records whose rows were written, after what the mirror had
    (``timeline.rows``); ``actor`` names the rows only seen."""
    events = JOB_EVENTS if kind is JOBS else BATCH_EVENTS
    # An item at status version 0 was just created: it has no timeline to look up.
    orphans = [
        key
        for record in outcome.written
        if outcome.previous[key := getattr(record, kind.key)] is None and record.status_version
    ]
    last = _events.last_known(events, orphans)
    rows: list[dict[str, Any]] = []
    for record in outcome.written:
        key = getattr(record, kind.key)
        row = outcome.previous[key]
        known = (row["status_version"], row["status"]) if row is not None else last.get(key)
        rows += (_events.values(events, record, r, at) for r in timeline.rows(record, known, actor))
    _events.write(events, rows)


def _write_told_events(kind: _Kind, records: list, befores: dict, actor: str, at) -> None:
    """The row of each record whose writer told the status it moved from (write-through),
    even one the item's row has gone past: exact."""
    events = JOB_EVENTS if kind is JOBS else BATCH_EVENTS
    rows = [
        _events.values(events, record, timeline.told(record, befores[k] or "", actor), at)
        for record in records
        if (k := (getattr(record, kind.key), record.status_version)) in befores
    ]
    _events.write(events, rows)


def recount(bids: Iterable[str] | None = None) -> int:
    """Recompute ``job_counts``/``job_total`` of ``bids`` (all when None); rows changed."""
    bids = None if bids is None else list(bids)
    jobs = Job.objects.all() if bids is None else Job.objects.filter(batch_id__in=bids)
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for bid, status, n in jobs.values_list("batch_id", "status").annotate(n=Count("id")).order_by():
        counts[bid][status] = n
    batches = Batch.objects.all() if bids is None else Batch.objects.filter(bid__in=bids)
    stale = []
    for pk, bid, had, total in batches.values_list("id", "bid", "job_counts", "job_total"):
        wanted = dict(sorted(counts.get(bid, {}).items()))
        if had != wanted or total != sum(wanted.values()):
            stale.append({"id": pk, "job_counts": wanted, "job_total": sum(wanted.values())})
    update(Batch, stale, ["job_counts", "job_total"])
    return len(stale)


def _retrying(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a transaction; again when a concurrent writer inserted the same row first."""
    for attempt in range(3):
        try:
            with transaction.atomic():
                return fn()
        except IntegrityError:
            if attempt == 2:
                raise
    return None


def _shift_counts(outcome: _Outcome) -> None:
    """Move each written job's count to its new status on its batch's row.

    Write-through runs this on every transition, so it adjusts the counts instead of
    counting the batch's jobs again; a count that would go negative (the row was off)
    gets a real recount.
    """
    deltas: dict[str, Counter] = defaultdict(Counter)
    for record in outcome.written:
        row = outcome.previous[record.jid]
        old = (row["batch_id"], row["status"]) if row else (None, None)
        if old == (record.bid, record.status):
            continue
        if old[0]:
            deltas[old[0]][old[1]] -= 1
        if record.bid:
            deltas[record.bid][record.status] += 1
    if not deltas:
        return
    rows, off = [], []
    for found in select_in(Batch, "bid", list(deltas), ("id", "bid", "job_counts")):
        pk, bid, counts = found["id"], found["bid"], found["job_counts"]
        merged = Counter(counts or {})
        merged.update(deltas[bid])
        if any(n < 0 for n in merged.values()):
            off.append(bid)
            continue
        clean = {k: n for k, n in sorted(merged.items()) if n}
        rows.append({"id": pk, "job_counts": clean, "job_total": sum(clean.values())})
    update(Batch, rows, ["job_counts", "job_total"])
    if off:
        recount(off)


def _rows_and_events(kind: _Kind, records: list, actor: str, at, since, befores) -> _Outcome:
    """The items' rows, then their timeline rows: told by their writer (``befores``) or
    following from the rows (records read back)."""
    outcome = _upsert(kind, records, at=at, since=since)
    if befores is None:
        _write_events(kind, outcome, actor, at)
    else:
        _write_told_events(kind, records, befores, actor, at)
    return outcome


def apply_jobs(
    records: list[JobRecord], *, actor: str = "", at=None, since=None, befores=None
) -> _Outcome:
    """Upsert job rows, their events and their batches' counts, in one transaction.

    ``befores`` maps ``(jid, status version)`` to the status each write moved from, as its
    writer told (write-through): then each record gets its exact event, even one a row
    has already gone past, and several records of one job each get theirs. Without it
    (records read back), the events are the records' timelines (``timeline.rows``) after
    what the rows had, ``actor`` naming the rows only seen.
    """
    at = at or timezone.now()

    def run() -> _Outcome:
        outcome = _rows_and_events(JOBS, records, actor, at, since, befores)
        if since is None:  # a full rebuild recounts every batch once at its end
            _shift_counts(outcome)
        return outcome

    return _retrying(run)


def apply_job(record: JobRecord, *, actor: str = "", at=None, before: str | None = None) -> None:
    befores = None if before is None else {(record.jid, record.status_version): before}
    apply_jobs([record], actor=actor, at=at, befores=befores)


def apply_job_statuses(
    store: QueueStore, records: list[JobRecord], *, actor: str = "", at=None, befores=None
) -> None:
    """Write status writes (``partial`` records) into existing rows: status fields only.

    A job without a row yet is read whole and upserted, so nothing is lost. ``befores``
    as for ``apply_jobs``.
    """
    at = at or timezone.now()
    missing: list[str] = []

    def run() -> _Outcome:
        missing.clear()
        rows = _rows(JOBS, [r.jid for r in records])
        out, changed = _Outcome(), []
        for record in records:
            row = rows.get(record.jid)
            if row is None:
                missing.append(record.jid)
                continue
            if _stale(record, row, None):
                continue
            values = job_values(record)
            values = {f: values[f] for f in JOB_STATUS_FIELDS}
            if all(row[f] == values[f] for f in JOB_STATUS_FIELDS):
                continue
            changed.append({"id": row["id"], **values, "read_at": at})
            out.changed.append(record.jid)
            out.previous[record.jid] = row
            out.written.append(record)
        update(Job, changed, [*JOB_STATUS_FIELDS, "read_at"])
        if befores is None:
            _write_events(JOBS, out, actor, at)
        else:
            _write_told_events(JOBS, records, befores, actor, at)
        _shift_counts(out)
        return out

    _retrying(run)
    whole = [r for r in (_reread(store, "job", jid) for jid in missing) if r is not None]
    if whole:
        apply_jobs(whole, actor=actor, at=at)


def _reread(store: QueueStore, kind: str, item_id: str):
    try:
        return store.jobs.get_job(item_id) if kind == "job" else store.batches.get_batch(item_id)
    except NotFound:
        return None


def apply_batches(
    records: list[BatchRecord], *, actor: str = "", at=None, since=None, befores=None
) -> _Outcome:
    """Upsert batch rows and their events (as ``apply_jobs``), in one transaction."""
    at = at or timezone.now()

    def run() -> _Outcome:
        outcome = _rows_and_events(BATCHES, records, actor, at, since, befores)
        if outcome.added and since is None:
            recount(outcome.added)
        return outcome

    return _retrying(run)


def apply_batch(
    record: BatchRecord, *, actor: str = "", at=None, before: str | None = None
) -> None:
    befores = None if before is None else {(record.bid, record.status_version): before}
    apply_batches([record], actor=actor, at=at, befores=befores)


def _chunks(items: list[str]) -> list[list[str]]:
    return [items[i : i + DB_BATCH] for i in range(0, len(items), DB_BATCH)]


def remove_jobs(jids: Iterable[str], at: datetime | None = None) -> int:
    """Mark job rows removed from the queue; rows marked (the first time).

    The rows stay, as their timelines do: a site keeps years of finished jobs here, found by
    ARK, local id or title long after the queue forgot them. Their batches' counts keep them
    too (the batch's history), so there is nothing to recount."""
    at = at or timezone.now()
    with transaction.atomic():
        return sum(
            # Its lock node went with it: the row is no longer one a worker holds.
            Job.objects.filter(jid__in=c, removed_at__isnull=True).update(
                removed_at=at, locked=False, read_at=at
            )
            for c in _chunks(list(jids))
        )


def remove_job(jid: str) -> None:
    remove_jobs([jid])


def remove_batches(bids: Iterable[str], at: datetime | None = None) -> int:
    """Mark batch rows removed from the queue, as ``remove_jobs``."""
    at = at or timezone.now()
    with transaction.atomic():
        return sum(
            Batch.objects.filter(bid__in=c, removed_at__isnull=True).update(
                removed_at=at, locked=False, read_at=at
            )
            for c in _chunks(list(bids))
        )


def remove_batch(bid: str) -> None:
    remove_batches([bid])


def mark(name: str, at: datetime | None = None, detail: dict | None = None) -> None:
    """Record when the mirror was last brought up to date, and how (``MirrorState``)."""
    defaults: dict[str, Any] = {"at": at or timezone.now()}
    if detail is not None:
        defaults["detail"] = detail
    MirrorState.objects.update_or_create(name=name, defaults=defaults)
