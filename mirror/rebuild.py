"""The full rebuild of the mirror from the whole tree, and what it found different."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobs.models import Job
from merritt_queue.core import history, snapshot
from merritt_queue.core.store import JobRecord, QueueStore

from . import access, steps, textindex
from .locks import locks_detail, store_locks, sync_collections
from .rows import BATCHES, JOBS, _Kind
from .upsert import (
    FULL,
    _Outcome,
    apply_batches,
    apply_jobs,
    mark,
    recount,
    remove_batches,
    remove_jobs,
)

# Rows fetched at a time when looking for rows whose item is gone.
ROWS_STREAMED = 5000
# Names a timeline row only seen, when an item's history could not be read.
ACTOR = history.MIRROR_RECONCILE


# Ids kept per kind of drift: a report lists the first ones, the counts are always whole
# (a rebuild into an empty mirror adds every job, and would hold every id).
LISTED = 50


@dataclass
class Drift:
    """What a full reconcile found different between the mirror and ZooKeeper: the first
    LISTED ids of each kind, and every count."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    jobs: int = 0
    batches: int = 0
    seconds: float = 0.0
    unreadable: dict[str, str] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0

    def count(self, name: str) -> int:
        return self.counts[name]

    def summary(self) -> dict[str, Any]:
        return {
            "added": self.count("added"),
            "changed": self.count("changed"),
            "removed": self.count("removed"),
            "unreadable": self.count("unreadable"),
            "jobs": self.jobs,
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
        }

    def note(self, name: str, ids: list[str]) -> None:
        kept: list[str] = getattr(self, name)
        kept += ids[: LISTED - len(kept)]
        self.counts[name] += len(ids)

    def note_unreadable(self, found: dict[str, str]) -> None:
        for item_id, why in list(found.items())[: LISTED - len(self.unreadable)]:
            self.unreadable[item_id] = why
        self.counts["unreadable"] += len(found)

    def take(self, outcome: _Outcome) -> None:
        self.note("added", outcome.added)
        self.note("changed", outcome.changed)


# Told (done, total) as the rebuild goes: the batches, then each chunk of jobs, mirrored.
OnProgress = Callable[[int, int], None]


def full_reconcile(
    store: QueueStore, progress: OnProgress | None = None, chunk: int | None = None
) -> Drift:
    """Rebuild the mirror from the whole tree; report what differed.

    Read and written ``chunk`` jobs at a time (default ``snapshot.JOB_CHUNK``), so what is
    held grows with the chunk, not with the tree: only the listing of every job id is
    whole (``jobids``: ZooKeeper answers a listing in one piece).
    """
    began, clock = timezone.now(), time.perf_counter()
    client, drift = store.client, Drift()
    listing = snapshot.read_listing(client)
    total = len(listing.bids) + len(listing.jids)
    tell = progress or (lambda done, total: None)
    batches = snapshot.read_batches(client, listing.bids)
    records = list(batches.records.values())
    drift.take(apply_batches(records, actor=ACTOR, at=began, since=began))
    done = len(listing.bids)
    tell(done, total)
    item_locks, present = dict(batches.locks), set(batches.records) | set(batches.unreadable)
    drift.note_unreadable(batches.unreadable)
    jobs_seen, missing = 0, set[str]()  # listed jobs without a status node: gone
    # Into a mirror missing most jobs, every history is needed: read with the jobs. Else
    # only the changed jobs' histories are (a job's history is most of what it weighs).
    whole = Job.objects.count() < len(listing.jids) // 2
    for items in snapshot.iter_jobs(
        client, listing.jids.chunks(chunk or snapshot.JOB_CHUNK), history=whole
    ):
        records = list(items.records.values())
        if not whole:
            records = _with_histories(client, records)
        outcome = apply_jobs(records, actor=ACTOR, at=began, since=began)
        steps.rebuild(client, records, began)
        drift.take(outcome)
        drift.note_unreadable(items.unreadable)
        item_locks.update(items.locks)
        jobs_seen += len(items.records) + len(items.unreadable)
        missing.update(items.missing)
        done += len(items.records) + len(items.unreadable) + len(items.missing)
        tell(min(done, total), total)
    gone = _remove_gone(BATCHES, present.__contains__, began)
    gone += _remove_gone(JOBS, lambda jid: jid in listing.jids and jid not in missing, began)
    drift.note("removed", gone)
    requests = access.refresh(client, actor=ACTOR)  # Merritt's access queues, read whole
    drift.note("added", requests.added)
    drift.note("changed", requests.changed)
    drift.note("removed", requests.removed)
    with transaction.atomic():
        recount()
    sync_collections(snapshot.collection_holds(listing.locks), began)
    detail = locks_detail(listing.locks, item_locks, began)
    store_locks(detail, began, detail["locks"])
    textindex.rebuild()
    drift.jobs, drift.batches = jobs_seen, len(present)
    drift.seconds = time.perf_counter() - clock
    mark(FULL, began, drift.summary())
    tell(total, total)
    return drift


def report_lines(drift: Drift, shown: int) -> list[str]:
    """The drift as ``reconcile --full`` prints it, ``shown`` ids listed per kind."""
    lines = []
    for name in ("added", "changed", "removed"):
        ids, n = getattr(drift, name), drift.count(name)
        more = f" ... (+{n - min(shown, len(ids))})" if n > min(shown, len(ids)) else ""
        lines.append(f"{name}: {n}" + (f"  {' '.join(ids[:shown])}{more}" if ids else ""))
    for item_id, why in list(drift.unreadable.items())[:shown]:
        lines.append(f"unreadable: {item_id}: {why}")
    lines.append(
        f"{drift.jobs} jobs and {drift.batches} batches in {drift.seconds:.1f} s "
        f"({drift.jobs_per_s:.0f} jobs/s)"
    )
    return lines


def kept_report(drift: Drift) -> dict[str, Any]:
    """The drift as the Maintenance page keeps it: every count, the first ids of each kind."""
    return {
        **drift.summary(),
        "ids": {name: getattr(drift, name)[:LISTED] for name in ("added", "changed", "removed")},
        "unreadable_ids": dict(list(drift.unreadable.items())[:LISTED]),
        "lines": report_lines(drift, LISTED),
    }


def _with_histories(client, records: list[JobRecord]) -> list[JobRecord]:
    """``records`` with their history where the mirror's timeline may need it: a job with
    no row, or whose row is at another status version."""
    versions = dict(
        Job.objects.filter(jid__in=[r.jid for r in records]).values_list("jid", "status_version")
    )
    stale = [r for r in records if versions.get(r.jid) != r.status_version]
    if not stale:
        return records
    read = {r.jid: r for r in snapshot.add_job_histories(client, stale)}
    return [read.get(r.jid, r) for r in records]


def _remove_gone(kind: _Kind, present: Callable[[str], bool], began: datetime) -> list[str]:
    """Mark removed the rows whose item is gone, unless written after the read began (created
    since); rows marked before are history, not drift. The rows are streamed, not loaded: a
    million read back at once weigh a few hundred MB."""
    live = kind.model._default_manager.filter(removed_at__isnull=True)
    rows = live.values_list(kind.key, "read_at").order_by()
    gone = [
        key
        for key, read_at in rows.iterator(chunk_size=ROWS_STREAMED)
        if read_at < began and not present(key)
    ]
    if gone:
        (remove_jobs if kind is JOBS else remove_batches)(gone)
    return sorted(gone)
