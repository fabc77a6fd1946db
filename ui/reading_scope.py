"""Which collections a person may read, on every page, export and API that shows items of a
collection: jobs, batches, objects, admin actions, holds, maintenance windows, deliveries and
their history. The one place these rules live; views narrow their rows here.

A viewer, operator or administrator reads every collection (docs/security.md: Who may do what),
as does a superuser. A depositor who holds none of those ranks reads only the collections of
their scope: their messages and titles come from other depositors' content. An account with
no role reads nothing (``ui.no_role`` shows it a page saying so): taking a person out of a
group never widens what they see. Read at every request, like every other right.

What concerns the whole queue (its pause, a queue-wide window or admin action) is shown to
everyone; of those, what names another collection's items (a maintenance operation's items
and report) is shown to readers of every collection only.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from batches.models import Profile
from steering.models import (
    ADMINISTRATOR,
    DEPOSITOR,
    MAINTENANCE,
    OPERATOR,
    VIEWER,
    AdminAction,
    AdminActionItem,
    CollectionScope,
    MaintenanceWindow,
    group_names,
)

READERS = frozenset({VIEWER, OPERATOR, ADMINISTRATOR})
ROLES = READERS | {DEPOSITOR}
QUEUE = "queue"


def has_role(user) -> bool:
    """Whether ``user`` was given any role (a superuser has every one)."""
    return user.is_superuser or bool(group_names(user) & ROLES)


def readable_collections(user) -> set[str] | None:
    """The collections ``user`` may read; None means every one."""
    if user.is_superuser:
        return None
    groups = group_names(user)
    if groups & READERS:
        return None
    if DEPOSITOR not in groups:
        return set()
    scope = CollectionScope.objects.filter(user=user).first()
    return set(scope.collections) if scope and isinstance(scope.collections, list) else set()


def reads_everything(user) -> bool:
    return readable_collections(user) is None


def readable_rows(user, rows: QuerySet) -> QuerySet:
    """``rows`` (jobs or batches) narrowed to the collections ``user`` may read, Merritt's
    rows that name only a profile included (``ui.filters.in_collection``)."""
    allowed = readable_collections(user)
    if allowed is None:
        return rows
    names = Profile.objects.filter(collection__in=allowed).values_list("name", flat=True)
    return rows.filter(Q(collection__in=allowed) | Q(collection="", profile__in=list(names)))


def in_readable(user, rows: QuerySet, field: str = "collection") -> QuerySet:
    """``rows`` whose ``field`` names a collection ``user`` may read (objects, holds)."""
    allowed = readable_collections(user)
    return rows if allowed is None else rows.filter(**{f"{field}__in": allowed})


def may_read(user, collection: str) -> bool:
    allowed = readable_collections(user)
    return allowed is None or collection in allowed


def require_readable(user, collection: str) -> None:
    """404 for an item of a collection ``user`` may not read: its existence is not told."""
    if not may_read(user, collection):
        raise Http404("No such item.")


# --- maintenance windows ----------------------------------------------------------------


def readable_windows(user, rows: QuerySet | None = None) -> QuerySet:
    """The queue's windows and those holding a collection ``user`` may read."""
    rows = MaintenanceWindow.objects.all() if rows is None else rows
    allowed = readable_collections(user)
    if allowed is None:
        return rows
    queues = (MaintenanceWindow.QUEUE, *MaintenanceWindow.ACCESS_SCOPES)
    return rows.filter(Q(scope__in=queues) | Q(collection__in=allowed))


# --- admin actions ------------------------------------------------------------------------


def _item_readable(allowed: set[str]) -> Q:
    """An audit row of a readable collection, or the queue itself (a pause's ``ingest``);
    a maintenance operation's rows name no collection, yet items of any."""
    return (
        Q(collection__in=allowed)
        | Q(admin_action__scope="collection", item_id__in=allowed)
        | Q(collection="", admin_action__scope=QUEUE) & ~Q(admin_action__action__in=MAINTENANCE)
    )


def readable_actions(user, actions: QuerySet | None = None) -> QuerySet:
    """The admin actions ``user`` may read: those on an item of their collections, and those
    on the whole queue (``readable_items`` then says which of their items they see)."""
    actions = AdminAction.objects.all() if actions is None else actions
    allowed = readable_collections(user)
    if allowed is None:
        return actions
    mine = AdminActionItem.objects.filter(_item_readable(allowed)).values("admin_action")
    return actions.filter(Q(scope=QUEUE) | Q(pk__in=mine))


def readable_items(user, items: QuerySet) -> QuerySet:
    """The audit rows ``user`` may read, of the actions ``readable_actions`` gives them."""
    allowed = readable_collections(user)
    return items if allowed is None else items.filter(_item_readable(allowed))


def reads_whole_action(user, record: AdminAction) -> bool:
    """Whether ``user`` reads every item of ``record``, so also what it says of all of them
    (its parameters, its selection, a maintenance operation's report)."""
    allowed = readable_collections(user)
    if allowed is None:
        return True
    if record.action in MAINTENANCE:
        return False
    return not record.items.exclude(_item_readable(allowed)).exists()
