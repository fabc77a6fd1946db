"""Each job's and batch's state as of a moment, from the record of every status write.

An item's state at T is the state its latest recorded version at or before T entered
(versions, not times, order an item's record: docs/history.md); an item removed from the
queue at or before T (``removed_at``) was not in it. Replaying the whole record for each
moment would read every row ever written, so the rebuild starts from the present instead:
an item with no write after T is in the state its row holds now, and only the items written
after T (the ``at`` index) have their state looked up, each by the newest of its own rows
at or before T (the ``(id, status_version)`` index). A moment costs what was written since
it, not the size of the queue.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.db.models import (
    BooleanField,
    Case,
    Count,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    Subquery,
    When,
)
from django.utils import timezone

from batches.models import Batch, BatchEvent
from jobs.models import Job, JobEvent

from .scope import Scope

# Each kind: its mirror model, its record of status writes, and the id they share.
KINDS: dict[str, tuple[Any, Any, str]] = {
    "job": (Job, JobEvent, "jid"),
    "batch": (Batch, BatchEvent, "bid"),
}
# A moment's counts are kept this long: a review reads the same moment again and again (its
# lists, its diff), and only writes arriving late could change them.
CACHE_SECONDS = 10
PER_PAGE = 50


@dataclass
class Counts:
    by_state: Counter = field(default_factory=Counter)
    by_collection: dict[str, Counter] = field(default_factory=dict)
    # Items with versions not observed after the moment: their state then may have been
    # another than the one shown (a change in between was never recorded).
    uncertain: int = 0


@dataclass
class Item:
    id: str
    collection: str
    profile: str
    now: str  # its state now, or "removed"


@dataclass
class Page:
    rows: list
    number: int
    more: bool
    total: int | None = None


def written_after(kind: str, at: datetime, until: datetime | None = None):
    """The ids of the items with a status write after ``at`` (and at or before ``until``)."""
    _, event, key = KINDS[kind]
    rows = event.objects.filter(at__gt=at)
    if until is not None:
        rows = rows.filter(at__lte=until)
    return rows.values(key)


def state_then(kind: str, at: datetime) -> Subquery:
    """The state an item (the outer row) was in at ``at``; NULL: it had no recorded state."""
    _, event, key = KINDS[kind]
    mine = event.objects.filter(**{key: OuterRef(key)}, at__lte=at)
    return Subquery(mine.order_by("-status_version").values("to_status")[:1])


def _there(at: datetime) -> Q:
    return Q(removed_at__isnull=True) | Q(removed_at__gt=at)


@dataclass
class Snapshot:
    """Rows not removed, per state, collection and profile, as read at ``at``."""

    at: datetime
    groups: list


def snapshot(kind: str, at: datetime) -> Snapshot:
    """The live counts, read once for every moment before them: grouping every row is
    the dear part, and the moments reviewed are all in the past of one reading."""
    key = f"moment:live:{kind}"
    found = cache.get(key)
    if found is None or found.at < at:
        taken = timezone.now()
        model = KINDS[kind][0]
        rows = model.objects.filter(removed_at__isnull=True).order_by()
        groups = list(rows.values_list("status", "collection", "profile").annotate(n=Count("id")))
        found = Snapshot(taken, groups)
        cache.set(key, found, CACHE_SECONDS)
    return found


def counts(at: datetime, kind: str, scope: Scope) -> Counts:
    key = f"moment:counts:{kind}:{at.isoformat()}:{scope.key()}"
    found = cache.get(key)
    if found is None:
        found = _counts(at, kind, scope)
        cache.set(key, found, CACHE_SECONDS)
    return found


def _counts(at: datetime, kind: str, scope: Scope) -> Counts:
    """The snapshot's counts (at S, not before ``at``), less the items written in (at, S]
    in their state at S, plus the same items in their state at ``at``."""
    model, event, key = KINDS[kind]
    live = snapshot(kind, at)
    total: Counter = Counter()

    def add(state: str | None, collection: str, profile: str, n: int) -> None:
        if state and scope.admits(collection, profile):
            total[(state, collection)] += n

    for status, collection, profile, n in live.groups:
        add(status, collection, profile, n)
    groups = ("collection", "profile")
    changed = written_after(kind, at, live.at)
    # Removed in between and not written since: in the state its row still holds.
    gone = model.objects.filter(removed_at__gt=at, removed_at__lte=live.at)
    gone = gone.exclude(**{f"{key}__in": changed}).order_by()
    for status, collection, profile, n in gone.values_list("status", *groups).annotate(
        n=Count("id")
    ):
        add(status, collection, profile, n)
    later = written_after(kind, live.at)
    moved = model.objects.filter(_there(at), **{f"{key}__in": changed}).annotate(
        then=state_then(kind, at),
        at_s=Case(
            When(~Q(**{f"{key}__in": later}), then=F("status")),
            default=state_then(kind, live.at),
        ),
        live_at_s=ExpressionWrapper(_there(live.at), output_field=BooleanField()),
    )
    rows = moved.order_by().values_list("at_s", *groups, "then", "live_at_s")
    for at_s, collection, profile, then, live_at_s, n in rows.annotate(n=Count("id")):
        if live_at_s:
            add(at_s, collection, profile, -n)
        add(then, collection, profile, n)
    result = Counts()
    for (state, collection), n in total.items():
        if n > 0:
            result.by_state[state] += n
            result.by_collection.setdefault(collection, Counter())[state] += n
    jumps = event.objects.filter(at__gt=at, from_status="", status_version__gt=0)
    unsure = model.objects.filter(_there(at), **{f"{key}__in": jumps.values(key)})
    result.uncertain = scope.narrow(unsure).count()
    return result


def items(
    at: datetime,
    kind: str,
    state: str,
    scope: Scope,
    collection: str = "",
    page: int = 1,
    per: int = PER_PAGE,
) -> Page:
    """The items in ``state`` at ``at``, newest id first, a page at a time."""
    model, _, key = KINDS[kind]
    changed = written_after(kind, at)
    base = scope.narrow(model.objects.filter(_there(at)))
    if collection:
        base = base.filter(collection=collection)
    unchanged = base.filter(status=state).exclude(**{f"{key}__in": changed})
    moved = base.filter(**{f"{key}__in": changed}).annotate(then=state_then(kind, at))
    columns = (key, "collection", "profile", "status", "removed_at")
    start = (max(page, 1) - 1) * per
    # Each part in its index's order, merged: a union would sort both whole first.
    rows = sorted(
        [
            *unchanged.order_by(f"-{key}").values_list(*columns)[: start + per + 1],
            *moved.filter(then=state).order_by(f"-{key}").values_list(*columns)[: start + per + 1],
        ],
        reverse=True,
    )[start : start + per + 1]
    found = [
        Item(i, c, p, "removed" if removed is not None else status)
        for i, c, p, status, removed in rows[:per]
    ]
    return Page(found, max(page, 1), len(rows) > per)
