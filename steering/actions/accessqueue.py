"""The steering actions on Merritt's access (assembly) queues: requeue, delete and clean up a
request, pause and unpause a queue. The writes are the queue core's
(``merritt_queue.core.access``, the ones MerrittZK and its admin tool make); here each is
an action of the catalog, so it gets the confirmation page, the stale-version guard, the
reason, the role check and the audit trail every other action has.

A request is named ``small/qid0000000042`` (qids are counted per queue), a queue ``small``
or ``large``. A request's collection, for a person limited to some, is that of the object
its token names (``collection_of``); a request naming none is refused to them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from merritt_queue.core import access
from merritt_queue.core.errors import ChangedUnderYou, NotFound, QueueError
from merritt_queue.core.history import admin_actor
from steering.actions.kinds import ItemAction, Scope, Target
from steering.actions.results import Applied
from steering.roles import Role

log = logging.getLogger(__name__)
S = access.AccessStatus
# A queue's status as the actions judge it: its pause lock is there or not.
PAUSED, RUNNING = "Paused", "Running"


@dataclass(frozen=True)
class Request:
    """An access request as read now, with its object's collection ("" when none is known)."""

    item: access.AccessItem
    collection: str

    @property
    def status(self) -> str:
        return self.item.status or "unreadable"

    @property
    def status_version(self) -> int:
        return self.item.status_version

    @property
    def locked(self) -> bool:
        return self.item.locked

    @property
    def history(self):
        """Read with it: a skip then says who changed it since the page was shown."""
        return self.item.history


@dataclass(frozen=True)
class QueueItem:
    """An access queue as read now: ``small`` or ``large``, ``PAUSED`` or ``RUNNING``."""

    name: str
    status: str


def collection_of(item: access.AccessItem) -> str:
    """The collection of the object the request's token names, as the inventory knows it."""
    if not item.ark:
        return ""
    from inventory.models import InventoryObject

    row = InventoryObject.objects.filter(ark=item.ark).values_list("collection", flat=True)
    return row.first() or ""


def read_request(store, key: str) -> Request:
    try:
        queue, qid = access.split_key(key)
    except ValueError as e:
        raise QueueError(str(e)) from None
    item = access.read_item(store.client, queue, qid)
    if item is None:
        raise NotFound(f"access request {key} does not exist (removed?)")
    return Request(item, collection_of(item))


def read_requests(store, keys: list[str]) -> tuple[list[Target], list[str]]:
    """The requests named by ``keys`` as they are now, in one round; and the keys that name
    none (gone, or not a request's name)."""
    wanted, missing = [], []
    for key in keys:
        try:
            wanted.append(access.split_key(key))
        except ValueError:
            missing.append(key)
    found = access.read_items(store.client, wanted) if wanted else {}
    targets = []
    for queue, qid in wanted:
        item = found.get(access.key(queue, qid))
        if item is None:
            missing.append(access.key(queue, qid))
            continue
        request = Request(item, collection_of(item))
        targets.append(
            Target(item.key, request.status, item.status_version, request.collection, item.locked)
        )
    return targets, missing


def read_queue(store, name: str) -> QueueItem:
    if name not in access.QUEUES:
        raise QueueError(f"{name!r} is not an access queue (small or large)")
    return QueueItem(name, PAUSED if paused(store, name) else RUNNING)


def paused(store, queue: str) -> bool:
    return access.paused(store.client)[queue]


def set_paused(store, queue: str, on: bool) -> bool:
    """Pause or unpause ``queue``; True when this call changed it."""
    return (access.pause if on else access.unpause)(store.client, queue)


# --- what each action does ----------------------------------------------------------------


def _mirror(store, key: str) -> None:
    """The mirror follows the write at once (write-through); the follower would within
    seconds, so a failure here is logged, never the action's."""
    from mirror import access as mirrored

    try:
        mirrored.refresh(store.client, [key])
    except Exception:
        log.exception("the mirror did not follow access request %s; the follower will", key)


def _by(note: str) -> tuple[str, str]:
    by, _, reason = note.partition(": ")
    return admin_actor(by), reason


def _move(write, what: str):
    def run(store, request: Request, params, note: str) -> Applied:
        actor, reason = _by(note)
        item = request.item
        done = write(
            store.client,
            item.queue,
            item.qid,
            actor=actor,
            reason=reason,
            expected_version=item.status_version,
        )
        if not done.changed:
            raise ChangedUnderYou(f"access request {item.key} is {done.item.status} already")
        _mirror(store, item.key)
        return Applied(done.item, what)

    return run


def _cleanup(store, request: Request, params, note: str) -> Applied:
    item = request.item
    # The confirmation page judged the age; the item is at the version it showed, so its
    # status is at least that old still.
    got = access.remove_finished(
        store.client,
        timedelta(0),
        keys=[(item.queue, item.qid)],
        expected={item.key: item.status_version},
    )
    if item.key not in got.removed:
        raise ChangedUnderYou(f"access request {item.key} {got.skipped.get(item.key, 'stays')}")
    _mirror(store, item.key)
    return Applied(None, "removed from the queue (its token, status and history)")


def _pause(on: bool):
    def run(store, queue: QueueItem, params, note: str) -> Applied:
        if not set_paused(store, queue.name, on):
            raise ChangedUnderYou(f"the {queue.name} access queue is {queue.status} already")
        if on:
            return Applied(None, "paused: Merritt's access service takes no new request from it")
        return Applied(None, "unpaused: Merritt's access service takes its requests again")

    return run


ACTIONS = (
    ItemAction(
        name="access.requeue",
        scope=Scope.ACCESS,
        label="Requeue",
        role=Role.OPERATOR,
        applies_to=frozenset(access.REQUEUE_FROM),
        run=_move(access.requeue, "requeued: Pending, for Merritt's access service to assemble"),
        warning="Merritt's access service assembles the object again from the start.",
    ),
    ItemAction(
        name="access.delete",
        scope=Scope.ACCESS,
        label="Delete",
        role=Role.OPERATOR,
        applies_to=frozenset(access.DELETE_FROM),
        run=_move(access.delete, "deleted: it stays listed until it is cleaned up"),
        warning="The request is marked Deleted: its download link is no longer offered, and "
        "cleanup removes it from the queue later.",
    ),
    ItemAction(
        name="access.cleanup",
        scope=Scope.ACCESS,
        label="Clean up",
        role=Role.OPERATOR,
        applies_to=frozenset(access.REMOVABLE),
        run=_cleanup,
        warning="The request's nodes are removed from ZooKeeper for good; the mirror keeps "
        "its row as history.",
    ),
    ItemAction(
        name="access.pause",
        scope=Scope.ACCESS_QUEUE,
        label="Pause",
        role=Role.OPERATOR,
        applies_to=frozenset({RUNNING}),
        run=_pause(True),
        warning="Merritt's access service starts no new assembly from this queue until it is "
        "unpaused; an assembly already running finishes.",
    ),
    ItemAction(
        name="access.unpause",
        scope=Scope.ACCESS_QUEUE,
        label="Unpause",
        role=Role.OPERATOR,
        applies_to=frozenset({PAUSED}),
        run=_pause(False),
    ),
)
