"""A submission's rows against the mirror: the objects they would update and the jobs of
other batches already at work on the same objects.

Only the submission's own collection is searched: a local id is bound within a collection,
and which other collection holds an ARK is not the depositor's to learn. Every query is an
indexed IN-list of at most ``CHUNK`` values, so a manifest of 10,000 rows costs a few dozen
queries, never one a row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence

from inventory.models import InventoryObject, LocalIdentifier
from jobs.models import Job
from merritt_queue.core.manifests import ManifestRow
from merritt_queue.core.states import JobStatus

CHUNK = 500
# A job in one of these is no longer at work on its object.
ENDED = (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.DELETED)


def chunks(values: Iterable[str]) -> Iterator[list[str]]:
    values = sorted(set(values))
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


def duplicate_local_ids(rows: Sequence[ManifestRow]) -> list[dict]:
    lines: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        if row.local_id:
            lines[row.local_id].append(row.line)
    return [{"local_id": lid, "lines": ns} for lid, ns in lines.items() if len(ns) > 1]


def arks_of(rows: Sequence[ManifestRow], collection: str) -> dict[int, str]:
    """Each row's object, by line: the ARK it names, else the one its local id is bound to
    in ``collection``; rows naming neither are left out."""
    bound: dict[str, str] = {}
    for chunk in chunks(r.local_id for r in rows if r.local_id and not r.primary_id):
        found = LocalIdentifier.objects.filter(collection=collection, local_id__in=chunk)
        bound.update(found.values_list("local_id", "ark"))
    arks = {row.line: row.primary_id or bound.get(row.local_id or "") for row in rows}
    return {line: ark for line, ark in arks.items() if ark}


def updates(rows: Sequence[ManifestRow], collection: str, arks: dict[int, str]) -> list[dict]:
    """The rows whose object is in inventory in ``collection``: a new version of it."""
    titles: dict[str, str] = {}
    for chunk in chunks(arks.values()):
        found = InventoryObject.objects.filter(collection=collection, ark__in=chunk)
        titles.update(found.values_list("ark", "title"))
    return [
        {"line": r.line, "local_id": r.local_id or "", "ark": arks[r.line], "title": titles[ark]}
        for r in rows
        if (ark := arks.get(r.line)) in titles
    ]


def in_flight(
    rows: Sequence[ManifestRow], collection: str, arks: dict[int, str], exclude_bid: str = ""
) -> list[dict]:
    """The rows whose local id or object is a job's of another batch not yet ended (a
    removed job is history, not work)."""
    jobs = Job.objects.filter(collection=collection, removed_at__isnull=True)
    jobs = jobs.exclude(status__in=ENDED).order_by()
    if exclude_bid:
        jobs = jobs.exclude(batch_id=exclude_bid)
    fields = ("jid", "batch_id", "status", "local_id", "ark")
    found: dict[str, tuple] = {}
    by_local: dict[str, list[ManifestRow]] = defaultdict(list)
    by_ark: dict[str, list[ManifestRow]] = defaultdict(list)
    for row in rows:
        if row.local_id:
            by_local[row.local_id].append(row)
        if row.line in arks:
            by_ark[arks[row.line]].append(row)
    for chunk in chunks(by_local):
        found.update((j[0], j) for j in jobs.filter(local_id__in=chunk).values_list(*fields))
    for chunk in chunks(by_ark):
        found.update((j[0], j) for j in jobs.filter(ark__in=chunk).values_list(*fields))
    out: dict[tuple[int, str], dict] = {}
    for jid, bid, status, local_id, ark in found.values():
        for row in [*by_local.get(local_id, ()), *by_ark.get(ark, ())]:
            out[row.line, jid] = {
                "line": row.line,
                "local_id": row.local_id or "",
                "ark": ark,
                "jid": jid,
                "bid": bid or "",
                "status": status,
            }
    return [out[key] for key in sorted(out)]
