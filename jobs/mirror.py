"""The Django mirror of the ZooKeeper tree: filled by write-through, watches and full rebuilds.

ZooKeeper holds the truth; these rows (``Batch``, ``Job``, ``Collection``,
``JobEvent``, ``MirrorState``) are a copy for fast browsing, written only here.

Guarantees:

- Every row is written from a record read from ZooKeeper, or returned by a
  write ZooKeeper accepted. Views never write them.
- Never backwards: a record older than its row (lower ``status_version``) is
  ignored, so write-through, watches and rebuilds racing each other converge
  on the newest state. A full rebuild overwrites whatever differs from its
  read, except rows written after that read began.
- One ``JobEvent`` per status write observed, unique by (jid, status_version):
  from the status the mirror had, to the new one, with who made it (the
  store's actor; "watch" or "reconcile" when only seen afterwards). Events
  outlive their job's row.
- ``Batch.job_counts`` / ``job_total`` are recounted from the batch's Job rows
  in the same transaction as every change to them.
- The write-through listener never raises into the store, and does nothing
  while Django is not set up; a change it misses is caught by the watches or
  the next full rebuild.
- A full rebuild into an empty database restores every batch, job, collection
  and lock; a job's lost history becomes one event with actor "reconcile".
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, connection, models, transaction
from django.db.models import Count
from django.db.models.constants import OnConflict
from django.utils import timezone

from batches.models import Batch, Collection, Profile
from merritt_queue import snapshot
from merritt_queue import tree as t
from merritt_queue.errors import NotFound
from merritt_queue.itemkeys import holds_by_collection, profile_of
from merritt_queue.runtime import ProfileTable
from merritt_queue.store import BatchRecord, Change, JobRecord, QueueStore

from .models import Job, JobEvent, MirrorState

log = logging.getLogger(__name__)

JOB_FIELDS = (
    "batch_id",
    "collection",
    "profile",
    "submitter",
    "status",
    "last_successful_status",
    "retry_count",
    "priority",
    "space_needed",
    "local_id",
    "ark",
    "title",
    "message",
    "last_modified",
    "configuration",
    "identifiers",
    "metadata",
    "inventory",
    "store",
    "locked",
    "status_version",
)
BATCH_FIELDS = (
    "uuid",
    "collection",
    "profile",
    "submitter",
    "type",
    "title",
    "submitted",
    "status",
    "message",
    "last_modified",
    "submission",
    "status_report",
    "acquired",
    "locked",
    "status_version",
)
# What a status write can change: all a ``partial`` record (``QueueStore.job_heads``) knows.
JOB_STATUS_FIELDS = (
    "status",
    "last_successful_status",
    "retry_count",
    "priority",
    "message",
    "last_modified",
    "locked",
    "status_version",
)
# Between the local ids of one job in its ``local_id`` column (jobs.filters matches each).
LOCAL_ID_SEPARATOR = "; "
WRITE_THROUGH, WATCH, FULL, LOCKS = "write-through", "watch", "full", "locks"
# Rows per bulk UPDATE and per DELETE ... IN (...); rows per executemany of an INSERT.
DB_BATCH = 500
DB_CHUNK = 5000
# The write-through's freshness row is rewritten at most this often (seconds) per process.
MARK_EVERY = 1.0


# --- records -> row values ------------------------------------------------------------


# Many jobs share a second: parsing each distinct timestamp once halves a rebuild's parsing.
_timestamp = functools.lru_cache(maxsize=4096)(t.parse_timestamp)


def _text(value) -> str:
    return "" if value is None else str(value)


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _max_lengths(model) -> dict[str, int]:
    return {
        f.attname: f.max_length
        for f in model._meta.concrete_fields
        if isinstance(f, models.CharField) and f.max_length
    }


_LIMITS = {Job: _max_lengths(Job), Batch: _max_lengths(Batch)}


def _fit(model, values: dict) -> dict:
    """Cut text to the column's length: the tree may hold what another tool wrote."""
    for name, limit in _LIMITS[model].items():
        value = values.get(name)
        if isinstance(value, str) and len(value) > limit:
            values[name] = value[:limit]
    return values


def local_ids_text(identifiers: dict, configuration: dict) -> str:
    """Every local id of the job, joined by LOCAL_ID_SEPARATOR, as many whole ids as the
    column holds: Merritt's ``identifiers.local_id`` is a list, and a cut id would be a
    wrong one (the identifiers node, mirrored whole, still has them all)."""
    local = identifiers.get("local_id")
    values = local if isinstance(local, list) else [local]
    ids = [_text(x) for x in values if x] or [_text(configuration.get("local_id") or "")]
    limit = _LIMITS[Job]["local_id"]
    kept: list[str] = []
    for lid in dict.fromkeys(ids):
        if len(LOCAL_ID_SEPARATOR.join([*kept, lid])) > limit:
            break
        kept.append(lid)
    return LOCAL_ID_SEPARATOR.join(kept) if kept else ids[0]


def job_values(record: JobRecord) -> dict[str, Any]:
    """The mirrored fields of a job record (``JOB_FIELDS``)."""
    conf, ids, meta = (
        _dict(record.configuration),
        _dict(record.identifiers),
        _dict(record.metadata),
    )
    values = {
        "batch_id": record.bid or None,
        "collection": _text(conf.get("collection")),
        "profile": _text(profile_of(conf)),
        "submitter": _text(conf.get("submitter")),
        "status": record.status,
        "last_successful_status": record.last_successful_status or "",
        "retry_count": max(record.retry_count, 0),
        "priority": min(max(record.priority, 0), 99),
        "space_needed": record.space_needed,
        "local_id": local_ids_text(ids, conf),
        "ark": _text(ids.get("primary_id")),
        "title": _text(meta.get("erc_what") or conf.get("title")),
        "message": record.message,
        "last_modified": _timestamp(record.last_modified),
        "configuration": record.configuration if record.configuration is not None else {},
        "identifiers": record.identifiers,
        "metadata": record.metadata,
        "inventory": record.inventory,
        "store": record.store,
        "locked": record.locked,
        "status_version": record.status_version,
    }
    return _fit(Job, values)


def batch_values(record: BatchRecord) -> dict[str, Any]:
    """The mirrored fields of a batch record (``BATCH_FIELDS``)."""
    sub = _dict(record.submission)
    values = {
        "uuid": _text(sub.get("batchID")),
        "collection": _text(sub.get("collection")),
        "profile": _text(sub.get("profile")),
        "submitter": _text(sub.get("submitter")),
        "type": _text(sub.get("type")),
        "title": _text(sub.get("erc_what") or sub.get("filename")),
        "submitted": _timestamp(_text(sub.get("submitted"))),
        "status": record.status,
        "message": record.message,
        "last_modified": _timestamp(record.last_modified),
        "submission": record.submission if record.submission is not None else {},
        "status_report": record.status_report,
        "acquired": record.acquired,
        "locked": record.locked,
        "status_version": record.status_version,
    }
    return _fit(Batch, values)


@dataclass(frozen=True)
class _Kind:
    model: type[models.Model]
    key: str
    fields: tuple[str, ...]
    values: Callable[[Any], dict]


JOBS = _Kind(Job, "jid", JOB_FIELDS, job_values)
BATCHES = _Kind(Batch, "bid", BATCH_FIELDS, batch_values)


# --- upserting ------------------------------------------------------------------------


@dataclass
class _Outcome:
    """What an upsert did: ids added and changed, and each written record's previous row."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    previous: dict[str, dict | None] = field(default_factory=dict)
    written: list = field(default_factory=list)  # the records whose rows were written


def _prepare(field: models.Field) -> Callable[[Any], Any] | None:
    """How a value of ``field`` becomes a database parameter; None when it already is one.

    The backend's adapters directly: the values are already the right type, and
    ``get_db_prep_save`` re-validates each one at several times the cost.
    """
    if isinstance(field, models.JSONField):
        return lambda value: connection.ops.adapt_json_value(value, field.encoder)
    if isinstance(field, models.DateTimeField):
        return connection.ops.adapt_datetimefield_value
    return None


def insert(model: type[models.Model], rows: list[dict], *, ignore_conflicts: bool = False):
    """INSERT ``rows`` (field name -> value; defaults fill the rest) with executemany.

    What ``bulk_create`` does, several times faster for many rows: SQLite's
    999-parameter limit makes Django compile one INSERT per 40 job rows.
    """
    if not rows:
        return
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    prepare = [(f.attname, f, _prepare(f)) for f in fields]
    params = [
        tuple(
            (prep(v) if prep and v is not None else v)
            for name, f, prep in prepare
            for v in [row[name] if name in row else f.get_default()]
        )
        for row in rows
    ]
    on_conflict = OnConflict.IGNORE if ignore_conflicts else None
    ops, quote = connection.ops, connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    sql = (
        f"{ops.insert_statement(on_conflict=on_conflict)} {quote(model._meta.db_table)} "
        f"({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
        f" {ops.on_conflict_suffix_sql(fields, on_conflict, None, None)}"
    )
    with connection.cursor() as cursor:
        for start in range(0, len(params), DB_CHUNK):
            cursor.executemany(sql, params[start : start + DB_CHUNK])


def update(model: type[models.Model], rows: list[dict], fields: list[str]) -> None:
    """UPDATE ``fields`` of rows by ``id`` with executemany (``bulk_update`` builds one CASE
    expression per field and row, and costs more than the write it makes)."""
    if not rows:
        return
    meta, quote = model._meta, connection.ops.quote_name
    targets = [meta.get_field(f) for f in fields]
    prepare = [(f.attname, _prepare(f)) for f in targets]
    params = [
        (
            *((prep(row[n]) if prep and row[n] is not None else row[n]) for n, prep in prepare),
            row["id"],
        )
        for row in rows
    ]
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in targets)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"
    with connection.cursor() as cursor:
        for start in range(0, len(params), DB_CHUNK):
            cursor.executemany(sql, params[start : start + DB_CHUNK])


def _rows(kind: _Kind, ids: list[str]) -> dict[str, dict]:
    rows = kind.model.objects.filter(**{f"{kind.key}__in": ids}).values(
        "id", kind.key, "read_at", *kind.fields
    )
    return {r[kind.key]: r for r in rows}


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
    out, new, changed = _Outcome(), [], []
    for key, record in latest.items():
        values, row = kind.values(record), rows.get(key)
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
    return out


def _event_of(record: JobRecord, before: str, actor: str, at: datetime) -> dict[str, Any]:
    return {
        "jid": record.jid,
        "bid": record.bid or "",
        "from_status": before,
        "to_status": record.status,
        "at": _timestamp(record.last_modified) or at,
        "message": record.message,
        "retry_count": max(record.retry_count, 0),
        "actor": actor[:150],
        "status_version": record.status_version,
    }


def _last_events(jids: list[str]) -> dict[str, str]:
    """The last status each job's events reached (for jobs without a row)."""
    last: dict[str, tuple[int, str]] = {}
    rows = JobEvent.objects.filter(jid__in=jids).values_list("jid", "status_version", "to_status")
    for jid, version, status in rows:
        if jid not in last or version > last[jid][0]:
            last[jid] = (version, status)
    return {jid: status for jid, (_, status) in last.items()}


def _write_events(outcome: _Outcome, actor: str, at: datetime) -> None:
    """One event per status write the rows had not seen yet."""
    # A job at status version 0 was just created: it has no history to look up.
    orphans = [
        r.jid for r in outcome.written if outcome.previous[r.jid] is None and r.status_version != 0
    ]
    before = _last_events(orphans) if orphans else {}
    events = []
    for record in outcome.written:
        row = outcome.previous[record.jid]
        if row is not None and row["status_version"] == record.status_version:
            continue
        status = row["status"] if row is not None else before.get(record.jid, "")
        events.append(_event_of(record, status, actor, at))
    insert(JobEvent, events, ignore_conflicts=True)


def _write_told_events(records: list[JobRecord], befores: dict, actor: str, at) -> None:
    """An event for each record whose writer told the status it moved from; one already
    there for that status version (a watcher's, or this write's seen before) stays."""
    events = [
        _event_of(record, befores[key] or "", actor, at)
        for record in records
        if (key := (record.jid, record.status_version)) in befores
    ]
    insert(JobEvent, events, ignore_conflicts=True)


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
    for pk, bid, counts in Batch.objects.filter(bid__in=list(deltas)).values_list(
        "id", "bid", "job_counts"
    ):
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


def apply_jobs(
    records: list[JobRecord], *, actor: str = "", at=None, since=None, befores=None
) -> _Outcome:
    """Upsert job rows, their events and their batches' counts, in one transaction.

    ``befores`` maps ``(jid, status version)`` to the status each write moved from, as its
    writer told (write-through): then each record gets its event from it, even one a row
    has already gone past, and several records of one job each get theirs. A watcher that
    read the job between a worker's writes and the worker's delayed flush would otherwise
    leave those steps out of the timeline. Without it (records read back), the events
    follow from the rows.
    """
    at = at or timezone.now()

    def run() -> _Outcome:
        outcome = _upsert(JOBS, records, at=at, since=since)
        if befores is None:
            _write_events(outcome, actor, at)
        else:
            _write_told_events(records, befores, actor, at)
        if since is None:  # a full rebuild recounts every batch once at its end
            _shift_counts(outcome)
        return outcome

    return _retrying(run)


def apply_job(record: JobRecord, *, actor: str = "", at=None, before: str | None = None) -> None:
    befores = None if before is None else {(record.jid, record.status_version): before}
    apply_jobs([record], actor=actor, at=at, befores=befores)


def apply_job_statuses(
    store: QueueStore, records: list[JobRecord], *, actor: str = "", at=None
) -> None:
    """Write status writes (``partial`` records) into existing rows: status fields only.

    A job without a row yet is read whole and upserted, so nothing is lost.
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
        _write_events(out, actor, at)
        _shift_counts(out)
        return out

    _retrying(run)
    whole = [r for r in (_reread(store, "job", jid) for jid in missing) if r is not None]
    if whole:
        apply_jobs(whole, actor=actor, at=at)


def apply_batches(records: list[BatchRecord], *, at=None, since=None) -> _Outcome:
    at = at or timezone.now()

    def run() -> _Outcome:
        outcome = _upsert(BATCHES, records, at=at, since=since)
        if outcome.added and since is None:
            recount(outcome.added)
        return outcome

    return _retrying(run)


def apply_batch(record: BatchRecord, *, actor: str = "", at=None) -> None:
    apply_batches([record], at=at)


def _chunks(items: list[str]) -> list[list[str]]:
    return [items[i : i + DB_BATCH] for i in range(0, len(items), DB_BATCH)]


def remove_jobs(jids: Iterable[str]) -> int:
    """Delete job rows (their events stay as history); recount their batches."""
    deleted, bids = 0, set()
    with transaction.atomic():
        for chunk in _chunks(list(jids)):
            rows = Job.objects.filter(jid__in=chunk)
            bids.update(rows.values_list("batch_id", flat=True))
            deleted += rows.delete()[0]
        recount(b for b in bids if b)
    return deleted


def remove_job(jid: str) -> None:
    remove_jobs([jid])


def remove_batches(bids: Iterable[str]) -> int:
    with transaction.atomic():
        return sum(Batch.objects.filter(bid__in=c).delete()[0] for c in _chunks(list(bids)))


def remove_batch(bid: str) -> None:
    remove_batches([bid])


def mark(name: str, at: datetime | None = None, detail: dict | None = None) -> None:
    """Record when the mirror was last brought up to date, and how (``MirrorState``)."""
    defaults: dict[str, Any] = {"at": at or timezone.now()}
    if detail is not None:
        defaults["detail"] = detail
    MirrorState.objects.update_or_create(name=name, defaults=defaults)


# --- write-through --------------------------------------------------------------------


def _django_ready() -> bool:
    from django.apps import apps

    return apps.ready


def _reread(store: QueueStore, kind: str, item_id: str):
    try:
        return store.get_job(item_id) if kind == "job" else store.get_batch(item_id)
    except NotFound:
        return None


def apply_change(store: QueueStore, change: Change) -> None:
    """Reflect one store write in the mirror (re-reading the item when the change has no record)."""
    if change.kind == "collection":
        apply_collection(change.id, store.collection_hold(change.id))
        return
    if change.data and change.record is None and apply_job_data(change.id, change.data):
        return
    record = None if change.removed else change.record or _reread(store, change.kind, change.id)
    if change.kind == "job":
        if record is not None and record.partial:
            apply_job_statuses(store, [record], actor=change.actor)
        elif record is None:
            remove_job(change.id)
        else:
            apply_job(record, actor=change.actor, before=change.old_status or "")
    elif record is None:
        remove_batch(change.id)
    else:
        apply_batch(record, actor=change.actor)


def apply_changes(store: QueueStore, changes: list[Change]) -> None:
    """Reflect many store writes in order; runs of job moves go in one transaction each.

    A run ends where the actor or the kind of record changes, or where a job comes
    again in a run of ``partial`` records (whole records of one job can share a run:
    each still becomes its own timeline event). A data write that a later whole record
    of its job carries is left out: that record writes it.
    """
    changes = _without_carried_data(changes)
    run: list[JobRecord] = []
    befores: dict[tuple[str, int], str] = {}
    seen: set[str] = set()
    key: tuple[str, bool] = ("", False)

    def flush() -> None:
        if not run:
            return
        actor, partial = key
        if partial:
            apply_job_statuses(store, list(run), actor=actor)
        else:
            apply_jobs(list(run), actor=actor, befores=dict(befores))
        run.clear()
        befores.clear()
        seen.clear()

    for change in changes:
        record = change.record
        if change.kind != "job" or record is None or change.removed:
            flush()
            apply_change(store, change)
            continue
        if (change.actor, record.partial) != key or (record.partial and change.id in seen):
            flush()
            key = (change.actor, record.partial)
        run.append(record)
        befores[(change.id, record.status_version)] = change.old_status or ""
        seen.add(change.id)
    flush()


def _without_carried_data(changes: list[Change]) -> list[Change]:
    later: dict[str, JobRecord] = {}  # the next whole record of each job, walking backwards
    kept: list[Change] = []
    for change in reversed(changes):
        record = change.record
        if change.kind == "job" and record is not None and not record.partial:
            later[change.id] = record
        elif change.kind == "job" and change.removed:
            later.pop(change.id, None)
        elif change.kind == "job" and change.data and change.record is None:
            record = later.get(change.id)
            if record is not None and all(
                getattr(record, name, None) == value for name, value in change.data.items()
            ):
                continue
        kept.append(change)
    kept.reverse()
    return kept


# Data nodes whose columns follow from the node alone (identifiers and metadata feed columns
# that also depend on the configuration, so their writes re-read the job).
_DATA_COLUMNS = {"space_needed", "inventory", "store"}


@functools.cache
def _data_sql(names: tuple[str, ...], vendor: str) -> str:
    meta, quote = Job._meta, connection.ops.quote_name
    columns = [meta.get_field(n).column for n in (*names, "read_at")]
    assignments = ", ".join(f"{quote(c)} = %s" for c in columns)
    return f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote('jid')} = %s"


def apply_job_data(jid: str, data: dict[str, Any]) -> bool:
    """Write a job's data nodes straight into its row; False when that cannot be done
    (a node with derived columns, or no row yet), for the caller to re-read the job.

    A handler writes several per job: one prepared UPDATE each instead of a read of the
    whole job from ZooKeeper and an upsert. ``read_at`` moves too, so a full rebuild that
    read the job before this write does not put the old value back.
    """
    names = tuple(sorted(data))
    if not set(names) <= _DATA_COLUMNS:
        return False
    values = [*(data[n] for n in names), timezone.now()]
    fields = [Job._meta.get_field(n) for n in (*names, "read_at")]
    params = [
        prep(v) if (prep := _prepare(f)) and v is not None else v
        for f, v in zip(fields, values, strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(_data_sql(names, connection.vendor), [*params, jid])
        return cursor.rowcount == 1


class _Marker:
    """Writes the write-through's freshness row at most every MARK_EVERY seconds."""

    def __init__(self) -> None:
        self.last = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            if time.monotonic() - self.last < MARK_EVERY:
                return
            self.last = time.monotonic()
        mark(WRITE_THROUGH)


_mark_write_through = _Marker()


def make_listener(store: QueueStore) -> Callable[[Change], None]:
    """The store listener that writes every change through to the mirror at once."""

    def listener(change: Change) -> None:
        if not _django_ready():
            return
        try:
            apply_change(store, change)
            _mark_write_through()
        except Exception:
            # The write itself succeeded; the watches or the next full reconcile catch up.
            log.exception("mirror write-through of %s %s failed", change.kind, change.id)

    def many(changes: list[Change]) -> None:
        if not _django_ready():
            return
        try:
            apply_changes(store, changes)
            _mark_write_through()
        except Exception:
            log.exception("mirror write-through of %d changes failed", len(changes))

    listener.many = many
    return listener


# --- full reconcile -------------------------------------------------------------------


@dataclass
class Drift:
    """What a full reconcile found different between the mirror and ZooKeeper."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    jobs: int = 0
    batches: int = 0
    seconds: float = 0.0
    unreadable: dict[str, str] = field(default_factory=dict)

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "added": len(self.added),
            "changed": len(self.changed),
            "removed": len(self.removed),
            "unreadable": len(self.unreadable),
            "jobs": self.jobs,
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
        }

    def take(self, outcome: _Outcome) -> None:
        self.added += outcome.added
        self.changed += outcome.changed


def full_reconcile(store: QueueStore) -> Drift:
    """Rebuild the mirror from the whole tree; report what differed."""
    began, clock = timezone.now(), time.perf_counter()
    client, drift = store.client, Drift()
    listing = snapshot.read_listing(client)
    batches = snapshot.read_batches(client, listing.bids)
    drift.take(apply_batches(list(batches.records.values()), at=began, since=began))
    item_locks, present = dict(batches.locks), set(batches.records) | set(batches.unreadable)
    drift.unreadable.update(batches.unreadable)
    present_jobs: set[str] = set()
    for items in snapshot.iter_jobs(client, listing.jids):
        outcome = apply_jobs(list(items.records.values()), actor="reconcile", at=began, since=began)
        drift.take(outcome)
        drift.unreadable.update(items.unreadable)
        item_locks.update(items.locks)
        present_jobs |= set(items.records) | set(items.unreadable)
    drift.removed += _remove_gone(BATCHES, present, began) + _remove_gone(JOBS, present_jobs, began)
    with transaction.atomic():
        recount()
    sync_collections(snapshot.collection_holds(listing.locks), began)
    mark(LOCKS, began, locks_detail(listing.locks, item_locks, began))
    drift.jobs, drift.batches = len(present_jobs), len(present)
    drift.seconds = time.perf_counter() - clock
    mark(FULL, began, drift.summary())
    return drift


def _remove_gone(kind: _Kind, present: set[str], began: datetime) -> list[str]:
    """Delete rows whose item is gone, unless written after the read began (created since)."""
    rows = kind.model.objects.values_list(kind.key, "read_at")
    gone = sorted(key for key, read_at in rows if key not in present and read_at < began)
    if gone:
        (remove_jobs if kind is JOBS else remove_batches)(gone)
    return gone


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
    detail["locks"] += items
    mark(LOCKS, at, detail)


def follow(store: QueueStore, stop: threading.Event) -> None:
    """Follow writes made by others until ``stop`` is set (see jobs.follow)."""
    from .follow import Follower

    Follower(store).run(stop)
