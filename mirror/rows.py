"""Records read from ZooKeeper -> the values of their mirror rows.

Only what each column holds is decided here; writing the rows is ``upsert``'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import models

from batches.models import Batch
from jobs.models import Job
from merritt_queue.core import tree as t
from merritt_queue.core.itemkeys import profile_of
from merritt_queue.core.store import BatchRecord, JobRecord
from ui.signatures import cause_of

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
    "signature",
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
    "approval",
    "acquired",
    "locked",
    "status_version",
)
# What a status write can change: all a ``partial`` record (``store.jobs.job_heads``) knows.
JOB_STATUS_FIELDS = (
    "status",
    "last_successful_status",
    "retry_count",
    "priority",
    "message",
    "signature",
    "last_modified",
    "locked",
    "status_version",
)
# Between the local ids of one job in its ``local_id`` column (jobs.filters matches each).
LOCAL_ID_SEPARATOR = "; "


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
        "signature": cause_of(record.message),
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
        "approval": record.approval,
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
