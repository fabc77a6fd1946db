"""The job's ``steps`` node in the mirror (``jobs.models.JobSteps``): one row per job.

Written with the job's row by the write-through (a step's commit carries the node as
written, so nothing is read again), on its own for an abandoned attempt's record, and by
``reconcile --full`` from ZooKeeper for the jobs whose row is missing or behind.

Guarantee: an older read never replaces a newer one. A row is replaced only by a node read
at a later status version, or at the same one with a different last attempt (an abandoned
attempt's record, kept without a status write).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import cast

from django.db import connection, models
from django.utils import timezone
from kazoo.client import KazooClient

from jobs.models import JobSteps
from merritt_queue.core import multiread as mr
from merritt_queue.core import steprecord as sr
from merritt_queue.core import tree as t
from merritt_queue.core.store import JobRecord

from .sql import adapter


def _last(record: sr.StepRecord) -> str:
    return str(record.attempts[-1].get("attempt") or "") if record.attempts else ""


# A row is replaced by a node read at a later status version, or at the same one with
# another last attempt; one statement (SQLite >= 3.24, PostgreSQL), no read before it.
_FIELDS = ("jid", "record", "status_version", "last_attempt", "damaged", "read_at")


@functools.cache
def _upsert_sql(vendor: str) -> str:
    quote = connection.ops.quote_name
    table = quote(JobSteps._meta.db_table)
    columns = [quote(cast(models.Field, JobSteps._meta.get_field(f)).column) for f in _FIELDS]
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns[1:])
    version, last = quote("status_version"), quote("last_attempt")
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))}) "
        f"ON CONFLICT ({quote('jid')}) DO UPDATE SET {updates} "
        f"WHERE {table}.{version} < EXCLUDED.{version} OR ({table}.{version} = EXCLUDED.{version} "
        f"AND {table}.{last} <> EXCLUDED.{last})"
    )


def apply(items: Iterable[tuple[str, int, sr.StepRecord]], at=None) -> None:
    """Write ``(jid, status version, record)`` rows that are new or newer (see the module)."""
    wanted = {jid: (version, record) for jid, version, record in items}
    if not wanted:
        return
    at = at or timezone.now()
    record_field = cast(models.Field, JobSteps._meta.get_field("record"))
    json_value, when = adapter(record_field), adapter(JobSteps._meta.get_field("read_at"))
    assert json_value is not None and when is not None
    params = [
        (
            jid,
            json_value(record.as_json()),
            version,
            _last(record),
            record.damaged,
            when(at),
        )
        for jid, (version, record) in wanted.items()
    ]
    with connection.cursor() as cursor:
        cursor.executemany(_upsert_sql(connection.vendor), params)


def apply_records(records: Iterable[JobRecord], at=None) -> None:
    """The rows of jobs whose record carries its ``steps`` node (a whole job's)."""
    apply(
        ((r.jid, r.status_version, r.steps) for r in records if r.steps and r.steps.exists),
        at,
    )


def rebuild(client: KazooClient, records: list[JobRecord], at=None) -> None:
    """Read the ``steps`` node of the jobs whose row is missing or older than the record
    read (multiReads) and write them: a full reconcile's part."""
    known = dict(
        JobSteps.objects.filter(jid__in=[r.jid for r in records]).values_list(
            "jid", "status_version"
        )
    )
    stale = [r for r in records if known.get(r.jid, -2) < r.status_version]
    # One multiRead per 500 rather than a request each: kazoo's cost per request, and
    # most jobs have no steps node, each a NoNodeError raised and caught.
    nodes = mr.read_many(client, [(mr.GET, t.job_node(r.jid, sr.NODE)) for r in stale])
    read = [
        (r.jid, r.status_version, sr.decode(node[0]))
        for r, node in zip(stale, nodes, strict=True)
        if node is not None
    ]
    apply(read, at)
