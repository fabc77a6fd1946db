"""Collection holds and queue pauses as they stood, from the audit of what put them on and
took them off: the actions (``collection.hold``, ``queue.pause`` and their releases) and
the maintenance windows' scheduler (``window.start``, ``window.reapply``, ``window.end``).

A hold another tool set (Merritt's admin) is in no audit of this site. One still on is
known from its node's creation (the mirror's ``Collection.held_at``, the locks' ``paused_at``):
a node that exists now and was made before the moment stood then. One lifted since is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from batches.models import Collection
from jobs.models import MirrorState
from steering.models import AdminActionItem

from .scope import Scope

ON = frozenset({"collection.hold", "queue.pause", "access.pause", "window.start", "window.reapply"})
OFF = frozenset({"collection.release", "queue.resume", "access.unpause", "window.end"})
# A window's end that left the hold on says so (steering.windows.scheduler._end); so does a
# release that lifted this site's hold while another tool's stayed
# (steering.actions.collectionholds.kept_words).
KEPT_ON = ("the hold stays on", "another tool set under")
QUEUE = "queue"
# An access queue's pause: by hand (item ``small`` or ``large``), or by a window, whose
# scope names the queue. Its target here is ``access-small`` or ``access-large``.
ACCESS = ("access-queue", "access-small", "access-large")
ACCESS_QUEUES = ("small", "large")


@dataclass
class Hold:
    target: str  # a collection's mnemonic, or "queue"
    by: str
    reason: str
    since: datetime
    action_id: int | None  # None: no audit row, known from the hold's node

    @property
    def collection(self) -> str:
        return self.target


@dataclass
class Change:
    target: str
    began: bool  # False: it ended
    by: str
    reason: str
    at: datetime
    action: str
    action_id: int | None


def _turns(kinds: tuple[str, ...], until: datetime, since: datetime | None = None):
    """The audit rows that turned holds on or off, oldest first: a person's actions, so
    few that reading them all is cheaper than any index."""
    rows = AdminActionItem.objects.filter(
        admin_action__action__in=ON | OFF,
        admin_action__scope__in=kinds,
        admin_action__started__lte=until,
        result="done",
    )
    if since is not None:
        rows = rows.filter(admin_action__started__gt=since)
    rows = rows.select_related("admin_action").order_by("admin_action__started", "pk")
    for item in rows:
        action = item.admin_action
        if action.action in OFF and any(words in item.detail for words in KEPT_ON):
            continue
        yield _target(action.scope, item.item_id), action.action in ON, action, item


def _target(scope_kind: str, item_id: str) -> str:
    if scope_kind == QUEUE:
        return QUEUE
    return f"access-{item_id}" if scope_kind in ACCESS else item_id


def _on_at(kinds: tuple[str, ...], at: datetime) -> dict[str, Hold]:
    on: dict[str, Hold] = {}
    for target, turned_on, action, _ in _turns(kinds, at):
        if turned_on:
            on.setdefault(
                target, Hold(target, action.username, action.reason, action.started, action.pk)
            )
        else:
            on.pop(target, None)
    return on


def holds_at(at: datetime, scope: Scope) -> list[Hold]:
    """The collections held at ``at``, by name, with who held them, why and since when."""
    held = _on_at(("collection",), at)
    for hold in _standing():
        if hold.since <= at:
            held.setdefault(hold.target, hold)
    return [held[c] for c in sorted(held) if scope.admits(c)]


def _standing() -> list[Hold]:
    """The collection holds on now, each since its node was made: the node's creation time
    as the mirror last read the locks, else the time the hold's data gives. Merritt's own
    holds are empty nodes (MerrittLocks.lockCollection): only the creation time dates them."""
    made = {
        lock.get("name"): _time(lock.get("ctime"))
        for lock in _locks().get("locks") or []
        if isinstance(lock, dict) and lock.get("kind") == "collection"
    }
    found = []
    for c in Collection.objects.filter(held=True).order_by("mnemonic"):
        if (since := made.get(c.mnemonic) or c.held_at) is not None:
            found.append(Hold(c.mnemonic, c.held_by, c.held_reason, since, None))
    return found


def _locks() -> dict:
    row = MirrorState.objects.filter(name="locks").first()
    return row.detail if row and isinstance(row.detail, dict) else {}


def pause_at(at: datetime) -> Hold | None:
    """The queue's pause at ``at``, None when it was running."""
    if (audited := _on_at((QUEUE,), at).get(QUEUE)) is not None:
        return audited
    detail = _locks()
    since = _time(detail.get("paused_at"))
    if detail.get("paused", detail.get("queue_paused")) and since is not None and since <= at:
        return Hold(QUEUE, "", "", since, None)
    return None


def access_pauses_at(at: datetime) -> dict[str, Hold | None]:
    """Each access queue's pause at ``at`` (None: running), from this site's audit only:
    the pause node Merritt's admin makes is empty and the mirror keeps no time of it."""
    on = _on_at(ACCESS, at)
    return {q: on.get(f"access-{q}") for q in ACCESS_QUEUES}


def _time(value) -> datetime | None:
    """A time as the mirror stores the locks' (``mirror.locks_detail``): ISO text, or
    milliseconds since the epoch."""
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, tz=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def changes_between(a: datetime, b: datetime, scope: Scope) -> list[Change]:
    """Holds and pauses that began or ended in ``(a, b]``, oldest first."""
    found = []
    for kinds in (("collection",), (QUEUE,), ACCESS):
        before = set(_on_at(kinds, a))
        for target, turned_on, action, _ in _turns(kinds, b, since=a):
            if kinds == ("collection",) and not scope.admits(target):
                continue
            if turned_on == (target in before):
                continue  # a window taking over a hold already on, or an end of none
            found.append(
                Change(
                    target,
                    turned_on,
                    action.username,
                    action.reason,
                    action.started,
                    action.action,
                    action.pk,
                )
            )
            before.symmetric_difference_update({target})
    began = {c.target for c in found if c.began}
    for h in _standing():
        if a < h.since <= b and h.target not in began and scope.admits(h.target):
            found.append(Change(h.target, True, h.by, h.reason, h.since, "", None))
    return sorted(found, key=lambda c: c.at)
