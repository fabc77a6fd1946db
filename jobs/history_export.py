"""The record as CSV or JSON: a job's, a batch's (with its jobs'), or the whole of it,
filtered. Streamed from database iterators, so the rows of 100,000 jobs are never in memory
at once; every format has the same columns, one row per status version.

Messages come from depositors' content: a CSV cell that a spreadsheet would run as a
formula (starting with = + - @, a tab or a carriage return) is written with a leading
apostrophe.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from batches.models import Batch, BatchEvent, mnemonic_problem
from jobs.models import Job, JobEvent
from jobs.timeline_view import who_of
from merritt_queue.core.tree import is_batch_id, is_job_id
from ui.filters import in_collection

COLUMNS = (
    "kind",
    "id",
    "batch",
    "version",
    "at",
    "from_status",
    "to_status",
    "retry_count",
    "actor",
    "who",
    "exact",
    "message",
)
FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json"}
CHUNK = 2000  # rows a database round trip reads
SEND = 64 * 1024  # characters the response sends at once, not one write per row
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
JOB_FIELDS: tuple[str, ...] = ("jid", "bid", "status_version", "at", "from_status", "to_status")
JOB_FIELDS += ("retry_count", "actor", "exact", "message")
BATCH_FIELDS: tuple[str, ...] = ("bid", "status_version", "at", "from_status", "to_status", "actor")
BATCH_FIELDS += ("exact", "message")


class ExportError(ValueError):
    """A filter that cannot be understood; the message says which and why."""


@dataclass(frozen=True)
class Filters:
    since: datetime | None = None
    until: datetime | None = None  # exclusive
    collection: str = ""
    jid: str = ""
    bid: str = ""

    def given(self) -> dict[str, str]:
        shown = {
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
            "collection": self.collection,
            "jid": self.jid,
            "bid": self.bid,
        }
        return {k: v for k, v in shown.items() if v}


def _instant(name: str, text: str, *, end: bool) -> datetime:
    """A date (the whole day: ``until`` ends after it) or a date and time (site zone if
    naive)."""
    # A date first: parse_datetime reads "2026-03-10" as that day's first instant.
    try:
        day = parse_date(text)
        moment = None if day else parse_datetime(text)
    except ValueError:  # well formed, impossible: 2026-02-30
        moment = day = None
    if moment is None and day is None:
        raise ExportError(
            f"{name}: {text[:40]!r} is not a date (YYYY-MM-DD) or a date and time "
            "(YYYY-MM-DDTHH:MM:SS, optionally with a zone)"
        )
    if moment is None:
        assert day is not None
        moment = datetime.combine(day + timedelta(days=1) if end else day, time())
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment


def parse_filters(params) -> Filters:
    """The export's filters from a query string; ExportError names a bad one."""
    values = {k: (params.get(k) or "").strip() for k in ("since", "until", "collection")}
    values |= {k: (params.get(k) or "").strip() for k in ("jid", "bid")}
    since = _instant("since", values["since"], end=False) if values["since"] else None
    until = _instant("until", values["until"], end=True) if values["until"] else None
    if since and until and since >= until:
        raise ExportError("since must be before until")
    if values["collection"] and (why := mnemonic_problem(values["collection"])):
        raise ExportError(f"collection: {why}")
    if values["jid"] and not is_job_id(values["jid"]):
        raise ExportError(f"jid: {values['jid'][:40]!r} is not a job id (jid and 10 digits)")
    if values["bid"] and not is_batch_id(values["bid"]):
        raise ExportError(f"bid: {values['bid'][:40]!r} is not a batch id (bid and 10 digits)")
    return Filters(since, until, values["collection"], values["jid"], values["bid"])


def _when(qs: QuerySet, f: Filters) -> QuerySet:
    if f.since:
        qs = qs.filter(at__gte=f.since)
    if f.until:
        qs = qs.filter(at__lt=f.until)
    return qs


def _in_collections(qs: QuerySet, model, key: str, collection: str, readable) -> QuerySet:
    """Only the rows of items (``model``, by ``key``) in ``collection`` and ``readable``."""
    if not collection and readable is None:
        return qs
    items = model.objects.all()
    if collection:  # as the lists filter it: Merritt's items name their profile only
        items = items.filter(in_collection(collection))
    if readable is not None:
        items = items.filter(collection__in=readable)
    return qs.filter(**{f"{key}__in": items.values(key)})


def job_events(f: Filters, collections: set[str] | None) -> QuerySet:
    qs = _when(JobEvent.objects.all(), f)
    if f.jid:
        qs = qs.filter(jid=f.jid)
    if f.bid:
        qs = qs.filter(bid=f.bid)
    qs = _in_collections(qs, Job, "jid", f.collection, collections)
    return qs.order_by("jid", "status_version")


def batch_events(f: Filters, collections: set[str] | None) -> QuerySet:
    if f.jid:  # a job's record holds no batch rows
        return BatchEvent.objects.none()
    qs = _when(BatchEvent.objects.all(), f)
    if f.bid:
        qs = qs.filter(bid=f.bid)
    qs = _in_collections(qs, Batch, "bid", f.collection, collections)
    return qs.order_by("bid", "status_version")


def _at(value: datetime | None) -> str:
    return value.isoformat() if value else ""


def rows(f: Filters, collections: set[str] | None) -> Iterator[dict]:
    """The batch rows, then the job rows, each in (id, status version) order."""
    for bid, version, at, old, new, actor, exact, message in (
        batch_events(f, collections).values_list(*BATCH_FIELDS).iterator(chunk_size=CHUNK)
    ):
        yield {
            "kind": "batch",
            "id": bid,
            "batch": bid,
            "version": version,
            "at": _at(at),
            "from_status": old,
            "to_status": new,
            "retry_count": None,
            "actor": actor,
            "who": who_of(actor).text if actor else "",
            "exact": exact,
            "message": message,
        }
    for jid, bid, version, at, old, new, retries, actor, exact, message in (
        job_events(f, collections).values_list(*JOB_FIELDS).iterator(chunk_size=CHUNK)
    ):
        yield {
            "kind": "job",
            "id": jid,
            "batch": bid,
            "version": version,
            "at": _at(at),
            "from_status": old,
            "to_status": new,
            "retry_count": retries,
            "actor": actor,
            "who": who_of(actor).text if actor else "",
            "exact": exact,
            "message": message,
        }


def safe_cell(value):
    """A text a spreadsheet shows as text, never runs (CSV injection)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_lines(records: Iterable[dict]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def line(values) -> str:
        writer.writerow(values)
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    yield line(COLUMNS)
    for record in records:
        yield line(_csv_value(c, record[c]) for c in COLUMNS)


def _csv_value(column: str, value):
    if column == "exact":
        return "yes" if value else "no"
    return "" if value is None else safe_cell(value)


def json_chunks(records: Iterable[dict], filters: dict[str, str]) -> Iterator[str]:
    head = {"exported_at": timezone.now().isoformat(), "filters": filters, "columns": COLUMNS}
    yield json.dumps(head, ensure_ascii=False)[:-1] + ', "rows": [\n'
    separator = ""
    for record in records:
        yield separator + json.dumps(record, ensure_ascii=False)
        separator = ",\n"
    yield "\n]}\n"


def gathered(pieces: Iterable[str], size: int = SEND) -> Iterator[str]:
    batch: list[str] = []
    length = 0
    for piece in pieces:
        batch.append(piece)
        length += len(piece)
        if length >= size:
            yield "".join(batch)
            batch, length = [], 0
    if batch:
        yield "".join(batch)


def response(fmt: str, f: Filters, collections: set[str] | None, name: str):
    """The streamed download of the rows ``f`` selects, as ``name``.``fmt``."""
    records = rows(f, collections)
    if fmt == "csv":
        body = csv_lines(records)
    else:
        body = json_chunks(records, f.given())
    reply = StreamingHttpResponse(gathered(body), content_type=FORMATS[fmt])
    reply["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    reply["X-Content-Type-Options"] = "nosniff"
    return reply
