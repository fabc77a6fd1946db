"""The write-through: the store's listener that reflects each write at once.

It never raises into the store and does nothing while Django is not set up; a
change it misses is caught by the watches (mirror.follow) or the next full rebuild. A lost
connection to ZooKeeper or the database is logged once, as a warning, until a write goes
through again: the reconciler repairs what it missed. Anything else is an error.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from django.db import connection, models
from django.utils import timezone

from jobs.models import Job
from merritt_queue.core import steprecord as sr
from merritt_queue.core.store import BatchRecord, Change, JobRecord, QueueStore

from . import steps
from .locks import apply_collection
from .outage import OutageReport
from .sql import adapter
from .upsert import (
    WRITE_THROUGH,
    _reread,
    apply_batch,
    apply_job,
    apply_job_statuses,
    apply_jobs,
    mark,
    remove_batch,
    remove_job,
)

log = logging.getLogger(__name__)

# The write-through's freshness row is rewritten at most this often (seconds) per process.
MARK_EVERY = 1.0


def _django_ready() -> bool:
    from django.apps import apps

    return apps.ready


def apply_change(store: QueueStore, change: Change) -> None:
    """Reflect one store write in the mirror (re-reading the item when the change has no record)."""
    if change.kind == "collection":
        apply_collection(change.id, store.holds.read_collection_hold(change.id))
        return
    if change.data and change.record is None and _apply_steps(change):
        return
    if change.data and change.record is None and apply_job_data(change.id, change.data):
        return
    record = None if change.removed else change.record or _reread(store, change.kind, change.id)
    # Only the writer's own record tells the status it moved from; one read back may be of
    # a later write, and takes its timeline from what it read (mirror.timeline).
    before = (change.old_status or "") if change.record is not None else None
    if change.kind == "job":
        assert not isinstance(record, BatchRecord)
        if record is not None and record.partial:
            befores = {(change.id, record.status_version): before or ""}
            apply_job_statuses(store, [record], actor=change.actor, befores=befores)
        elif record is None:
            remove_job(change.id)
        else:
            apply_job(record, actor=change.actor, before=before)
            steps.apply_records([record])
    elif record is None:
        remove_batch(change.id)
    else:
        assert not isinstance(record, JobRecord)
        apply_batch(record, actor=change.actor, before=before)


def apply_changes(store: QueueStore, changes: list[Change]) -> None:
    """Reflect many store writes in order; runs of job moves go in one transaction each.

    A run ends where the actor or the kind of record changes, or where a job comes
    again in a run of ``partial`` records (whole records of one job can share a run:
    each still becomes its own timeline event). A data write that a later whole record
    of its job carries is left out: that record writes it.
    """
    changes = _without_carried_data(changes)
    # Every whole record's steps, written once at the end: one statement per call.
    stepped: list[JobRecord] = []
    run: list[JobRecord] = []
    befores: dict[tuple[str, int], str] = {}
    seen: set[str] = set()
    key: tuple[str, bool] = ("", False)

    def flush() -> None:
        if not run:
            return
        actor, partial = key
        if partial:
            apply_job_statuses(store, list(run), actor=actor, befores=dict(befores))
        else:
            apply_jobs(list(run), actor=actor, befores=dict(befores))
            stepped.extend(run)
        run.clear()
        befores.clear()
        seen.clear()

    for change in changes:
        record = cast("JobRecord | None", change.record)
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
    steps.apply_records(stepped)


def _without_carried_data(changes: list[Change]) -> list[Change]:
    later: dict[str, JobRecord] = {}  # the next whole record of each job, walking backwards
    kept: list[Change] = []
    for change in reversed(changes):
        record = cast("JobRecord | None", change.record)
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


def _apply_steps(change: Change) -> bool:
    """An abandoned attempt's record, written alone (``store.steps.save_unfinished``)."""
    record = (change.data or {}).get(sr.NODE)
    if not isinstance(record, sr.StepRecord):
        return False
    version = int(record.attempts[-1].get("v", -1)) if record.attempts else -1
    steps.apply([(change.id, version, record)])
    return True


# Data nodes whose columns follow from the node alone (identifiers and metadata feed columns
# that also depend on the configuration, so their writes re-read the job).
_DATA_COLUMNS = {"space_needed", "inventory", "store"}


@functools.cache
def _data_sql(names: tuple[str, ...], vendor: str) -> str:
    meta, quote = Job._meta, connection.ops.quote_name
    columns = [cast(models.Field, meta.get_field(n)).column for n in (*names, "read_at")]
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
    fields = [cast(models.Field, Job._meta.get_field(n)) for n in (*names, "read_at")]
    params = [
        prep(v) if (prep := adapter(f)) and v is not None else v
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
    report = OutageReport(
        log,
        "mirror write-through",
        "ZooKeeper has every write; the reconciler (manage.py reconcile --watch) brings the "
        "mirror's rows up to date, at the latest at its next full reconcile "
        "(MQ_RECONCILE_SECONDS)",
    )

    def listener(change: Change) -> None:
        if not _django_ready():
            return
        try:
            apply_change(store, change)
            _mark_write_through()
        except Exception as e:
            # The write itself succeeded; the watches or the next full reconcile catch up.
            report.failed(e, "mirror write-through of %s %s failed", change.kind, change.id)
        else:
            report.worked()

    def many(changes: list[Change]) -> None:
        if not _django_ready():
            return
        try:
            apply_changes(store, changes)
            _mark_write_through()
        except Exception as e:
            report.failed(e, "mirror write-through of %d changes failed", len(changes))
        else:
            report.worked()

    listener.many = many  # type: ignore[attr-defined]
    return listener
