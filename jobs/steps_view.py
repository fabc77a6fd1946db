"""What the job page and its export show of what each step did (``jobs.models.JobSteps``).

One query per job. A person who reads every collection sees the whole record; a depositor
sees what ``steprecord.public`` leaves them (their content's URLs, statuses, bytes,
digests and the ARK), the same as the status API gives them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpResponse

from jobs.deliveries_view import job_deliveries
from jobs.models import Job, JobSteps
from jobs.timeline_view import who_of
from merritt_queue.core import steprecord as sr
from ui.reading_scope import reads_everything

# An entry's fields shown as its kind and columns, in this order; the rest follow.
_FIRST = ("url", "file", "ark", "call", "try", "http", "bytes", "ms")
KIND_NAMES = {
    "head": "HEAD",
    "get": "download",
    "copy": "upload copied",
    "digest": "digest",
    "unpacked": "container unpacked",
    "bag": "bag checked",
    "bag-info": "bag-info.txt",
    "ark": "ARK",
    "minter": "minter told",
    "storage": "stored",
    "storage-call": "storage service",
    "inventory": "inventory",
    "inventory-call": "inventory service",
    "ezid-call": "EZID",
    "callback": "callback",
}


@dataclass
class AttemptView:
    step: str
    to: str
    outcome: str
    at: str
    took: Any
    who: Any
    message: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    more: int = 0


@dataclass
class StepsView:
    attempts: list[AttemptView]
    found: bool
    dropped: int = 0
    dropped_entries: int = 0
    damaged: bool = False
    public: bool = False
    # The notifications the job's state changes sent (``deliveries_view``).
    deliveries: list[dict[str, Any]] = field(default_factory=list)


def record_for(jid: str) -> sr.StepRecord | None:
    row = JobSteps.objects.filter(jid=jid).only("record", "damaged").first()
    if row is None:
        return None
    return sr.StepRecord(exists=True, damaged=True) if row.damaged else sr.from_json(row.record)


def shown(record: sr.StepRecord, everything: bool) -> dict[str, Any]:
    """The record as ``everything`` (a reader of every collection) or a depositor may read it."""
    return record.as_json() if everything else sr.public(record)


def job_steps(user, job: Job) -> StepsView:
    everything = reads_everything(user)
    deliveries = job_deliveries(job.batch_id, job.jid, everything)
    record = record_for(job.jid)
    if record is None:
        return StepsView([], found=False, public=not everything, deliveries=deliveries)
    attempts = [_attempt(a, everything) for a in record.attempts]
    attempts.reverse()  # the newest first: what a person comes to look at
    return StepsView(
        attempts,
        found=True,
        dropped=record.dropped,
        dropped_entries=record.dropped_entries,
        damaged=record.damaged,
        public=not everything,
        deliveries=deliveries,
    )


def _attempt(a: dict[str, Any], everything: bool) -> AttemptView:
    entries = a.get("entries") or []
    if not everything:
        entries = sr.public(sr.StepRecord((a,), exists=True))["attempts"][0]["entries"]
    return AttemptView(
        step=str(a.get("step", "")),
        to=str(a.get("to", "")),
        outcome=str(a.get("outcome", "")),
        at=str(a.get("at", "")),
        took=a.get("took"),
        who=who_of(str(a.get("by") or "")) if everything and a.get("by") else None,
        message=str(a.get("msg") or "") if everything else "",
        entries=[_entry(e) for e in entries],
        more=int(a.get("more") or 0) if everything else 0,
    )


def _entry(e: dict[str, Any]) -> dict[str, Any]:
    kind = str(e.get("k") or e.get("kind") or "")
    rest = {k: v for k, v in e.items() if k not in ("k", "kind")}
    names = [n for n in _FIRST if n in rest] + [n for n in rest if n not in _FIRST]
    return {
        "kind": KIND_NAMES.get(kind, kind),
        "fields": [(n, _text(rest[n])) for n in names],
    }


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def export(user, job: Job) -> HttpResponse:
    """The record as a JSON download, as ``user`` may read it."""
    jid, everything = job.jid, reads_everything(user)
    record = record_for(jid)
    body = {
        "jid": jid,
        "found": record is not None,
        **(shown(record, everything) if record is not None else {}),
        "notifications": job_deliveries(job.batch_id, jid, everything),
    }
    response = HttpResponse(
        json.dumps(body, indent=1, ensure_ascii=False), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="{jid}-steps.json"'
    return response
