"""The locks held at a moment, and those taken or released between two, from the record
of locks over time (``jobs.LockSpan``, written by ``mirror.lockspans``).

A span's start is its node's creation time, exact; its end is known only to within the
mirror's reads (after ``last_seen_at``, by ``gone_seen_at``), so a lock counts as held
until the first read that no longer found it. Within the reader's scope: a job's or a
batch's lock by its row's collection, a collection's hold by its name, the queue's pauses
for everyone; storage, inventory and local-id locks name ARKs and local ids of any
collection, so only a reader of every collection sees them."""

from __future__ import annotations

from django.db.models import Q

from batches.models import Batch
from jobs.models import Job, LockSpan

from .scope import Scope

# A moment's list is for reading, not an export: the rest is on the locks page now.
LIMIT = 500
EVERYONE = frozenset({"queue"})
_ROWS = {"job": (Job.objects, "jid"), "batch": (Batch.objects, "bid")}


def held_at(at, scope: Scope) -> list[LockSpan]:
    spans = LockSpan.objects.filter(taken_at__lte=at).filter(
        Q(gone_seen_at=None) | Q(gone_seen_at__gt=at)
    )
    return _within(list(spans.order_by("path", "taken_at")[:LIMIT]), scope)


def turned(a, b, scope: Scope) -> tuple[list[LockSpan], list[LockSpan]]:
    """The spans taken after ``a`` up to ``b``, and those first found gone in that time."""
    spans = LockSpan.objects.filter(
        Q(taken_at__gt=a, taken_at__lte=b) | Q(gone_seen_at__gt=a, gone_seen_at__lte=b)
    )
    found = _within(list(spans.order_by("path", "taken_at")[:LIMIT]), scope)
    taken = [s for s in found if a < s.taken_at <= b]
    released = [s for s in found if s.gone_seen_at is not None and a < s.gone_seen_at <= b]
    return taken, released


def _within(spans: list[LockSpan], scope: Scope) -> list[LockSpan]:
    if scope.everything:
        return spans
    allowed = {s.pk for s in spans if s.kind in EVERYONE}
    allowed |= {s.pk for s in spans if s.kind == "collection" and scope.admits(s.name)}
    for kind, (manager, key) in _ROWS.items():
        names = {s.name for s in spans if s.kind == kind}
        if names:
            rows = scope.narrow(manager.filter(**{f"{key}__in": names}))
            mine = set(rows.values_list(key, flat=True))
            allowed |= {s.pk for s in spans if s.kind == kind and s.name in mine}
    return [s for s in spans if s.pk in allowed]
