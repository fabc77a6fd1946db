"""The full rebuild of the mirror from the whole tree, and what it found different."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobs.models import Job
from merritt_queue.core import history, snapshot
from merritt_queue.core.store import JobRecord, QueueStore

from . import steps, textindex
from .locks import locks_detail, sync_collections
from .rows import BATCHES, JOBS, _Kind
from .upsert import (
    FULL,
    LOCKS,
    _Outcome,
    apply_batches,
    apply_jobs,
    mark,
    recount,
    remove_batches,
    remove_jobs,
)

# Names a timeline row only seen, when an item's history could not be read.
ACTOR = history.MIRROR_RECONCILE


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


# Told (done, total) as the rebuild goes: the batches, then each chunk of jobs, mirrored.
OnProgress = Callable[[int, int], None]
# Ids listed per kind of drift in a kept report (the counts are always whole).
LISTED = 50


def full_reconcile(store: QueueStore, progress: OnProgress | None = None) -> Drift:
    """Rebuild the mirror from the whole tree; report what differed."""
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
    drift.unreadable.update(batches.unreadable)
    present_jobs: set[str] = set()
    # Into a mirror missing most jobs, every history is needed: read with the jobs. Else
    # only the changed jobs' histories are (a job's history is most of what it weighs).
    whole = Job.objects.count() < len(listing.jids) // 2
    for items in snapshot.iter_jobs(client, listing.jids, history=whole):
        records = list(items.records.values())
        if not whole:
            records = _with_histories(client, records)
        outcome = apply_jobs(records, actor=ACTOR, at=began, since=began)
        steps.rebuild(client, records, began)
        drift.take(outcome)
        drift.unreadable.update(items.unreadable)
        item_locks.update(items.locks)
        present_jobs |= set(items.records) | set(items.unreadable)
        done += len(items.records) + len(items.unreadable) + len(items.missing)
        tell(min(done, total), total)
    drift.removed += _remove_gone(BATCHES, present, began) + _remove_gone(JOBS, present_jobs, began)
    with transaction.atomic():
        recount()
    sync_collections(snapshot.collection_holds(listing.locks), began)
    mark(LOCKS, began, locks_detail(listing.locks, item_locks, began))
    textindex.rebuild()
    drift.jobs, drift.batches = len(present_jobs), len(present)
    drift.seconds = time.perf_counter() - clock
    mark(FULL, began, drift.summary())
    tell(total, total)
    return drift


def report_lines(drift: Drift, shown: int) -> list[str]:
    """The drift as ``reconcile --full`` prints it, ``shown`` ids listed per kind."""
    lines = []
    for name in ("added", "changed", "removed"):
        ids = getattr(drift, name)
        more = f" ... (+{len(ids) - shown})" if len(ids) > shown else ""
        lines.append(f"{name}: {len(ids)}" + (f"  {' '.join(ids[:shown])}{more}" if ids else ""))
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


def _remove_gone(kind: _Kind, present: set[str], began: datetime) -> list[str]:
    """Delete rows whose item is gone, unless written after the read began (created since)."""
    rows = kind.model._default_manager.values_list(kind.key, "read_at")
    gone = sorted(key for key, read_at in rows if key not in present and read_at < began)
    if gone:
        (remove_jobs if kind is JOBS else remove_batches)(gone)
    return gone
