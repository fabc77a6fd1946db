"""Which collections a person may read on the job and batch pages and lists, and in the
exports.

A viewer, operator or administrator reads every collection (docs/security.md: Who may do what),
as does an account in no group, as before. A depositor who holds none of those ranks
reads only the collections of their scope: their messages and titles come from other
depositors' content. Read at every request, like every other right.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from batches.models import Profile
from steering.models import (
    ADMINISTRATOR,
    DEPOSITOR,
    OPERATOR,
    VIEWER,
    CollectionScope,
    group_names,
)

READERS = frozenset({VIEWER, OPERATOR, ADMINISTRATOR})


def readable_collections(user) -> set[str] | None:
    """The collections ``user`` may read; None means every one."""
    if user.is_superuser:
        return None
    groups = group_names(user)
    if DEPOSITOR not in groups or groups & READERS:
        return None
    scope = CollectionScope.objects.filter(user=user).first()
    return set(scope.collections) if scope and isinstance(scope.collections, list) else set()


def readable_rows(user, rows: QuerySet) -> QuerySet:
    """``rows`` (jobs or batches) narrowed to the collections ``user`` may read, Merritt's
    rows that name only a profile included (``ui.filters.in_collection``)."""
    allowed = readable_collections(user)
    if allowed is None:
        return rows
    names = Profile.objects.filter(collection__in=allowed).values_list("name", flat=True)
    return rows.filter(Q(collection__in=allowed) | Q(collection="", profile__in=list(names)))


def may_read(user, collection: str) -> bool:
    allowed = readable_collections(user)
    return allowed is None or collection in allowed


def require_readable(user, collection: str) -> None:
    """404 for an item of a collection ``user`` may not read: its existence is not told."""
    if not may_read(user, collection):
        raise Http404("No such item.")
