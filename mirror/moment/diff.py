"""Two moments side by side: the counts at each, the items that moved in between with the
states they went through, and the holds, pauses and windows that began or ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.core.cache import cache

from . import holds, states, windows
from .scope import Scope

# In a path: the item was not in the queue (created in between), or versions not observed.
ABSENT, UNSEEN = "—", "?"


@dataclass
class Moved:
    id: str
    collection: str
    path: list[str]


@dataclass
class Diff:
    a: datetime
    b: datetime
    counts_a: states.Counts
    counts_b: states.Counts
    changed: states.Page
    holds: list = field(default_factory=list)
    windows: list = field(default_factory=list)


def moved(
    a: datetime, b: datetime, kind: str, scope: Scope, page: int = 1, per: int = states.PER_PAGE
) -> states.Page:
    """The items written in ``(a, b]``, newest id first, each with its path from a to b."""
    key_ = f"moment:moved:{kind}:{a.isoformat()}:{b.isoformat()}:{scope.key()}:{page}:{per}"
    found = cache.get(key_)
    if found is None:
        found = _moved(a, b, kind, scope, max(page, 1), per)
        cache.set(key_, found, states.CACHE_SECONDS)
    return found


def _moved(a: datetime, b: datetime, kind: str, scope: Scope, page: int, per: int) -> states.Page:
    model, event, key = states.KINDS[kind]
    rows = scope.narrow(model.objects.filter(**{f"{key}__in": states.written_after(kind, a, b)}))
    total = rows.count()
    start = (page - 1) * per
    # The page's ids first, then the state at ``a`` of those only.
    ids = list(rows.order_by(f"-{key}").values_list(key, flat=True)[start : start + per + 1])
    shown = model.objects.filter(**{f"{key}__in": ids[:per]})
    first = {
        i: (collection, then)
        for i, collection, then in shown.annotate(then=states.state_then(kind, a)).values_list(
            key, "collection", "then"
        )
    }
    steps: dict[str, list[str]] = {}
    writes = event.objects.filter(**{f"{key}__in": ids[:per]}, at__gt=a, at__lte=b)
    for i, old, new, version in writes.order_by(key, "status_version").values_list(
        key, "from_status", "to_status", "status_version"
    ):
        path = steps.setdefault(i, [])
        if not old and version > 0:
            path.append(UNSEEN)
        path.append(new)
    out = [Moved(i, first[i][0], [first[i][1] or ABSENT, *steps.get(i, [])]) for i in ids[:per]]
    return states.Page(out, page, len(ids) > per, total)


def between(a: datetime, b: datetime, kind: str, scope: Scope, page: int = 1) -> Diff:
    return Diff(
        a,
        b,
        states.counts(a, kind, scope),
        states.counts(b, kind, scope),
        moved(a, b, kind, scope, page),
        holds.changes_between(a, b, scope),
        windows.changes_between(a, b, scope),
    )
