"""The full rebuild of the mirror from the whole tree, and what it found different."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobs.models import Job
from merritt_queue.core import history, snapshot
from merritt_queue.core.store import JobRecord, QueueStore

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


def full_reconcile(store: QueueStore) -> Drift:
    """Rebuild the mirror from the whole tree; report what differed."""
    began, clock = timezone.now(), time.perf_counter()
    client, drift = store.client, Drift()
    listing = snapshot.read_listing(client)
    batches = snapshot.read_batches(client, listing.bids)
    records = list(batches.records.values())
    drift.take(apply_batches(records, actor=ACTOR, at=began, since=began))
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
    rows = kind.model.objects.values_list(kind.key, "read_at")
    gone = sorted(key for key, read_at in rows if key not in present and read_at < began)
    if gone:
        (remove_jobs if kind is JOBS else remove_batches)(gone)
    return gone
