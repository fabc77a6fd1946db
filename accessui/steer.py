"""Steering the access queue without a confirmation page: the API and ``manage.py access``
judge what they are asked exactly as the page does (``steering.actions.planning``, on the
requests as ZooKeeper holds them now) and take it through the same execution
(``steering.actions.execution``): the same role and collection checks, version guard, reason
and audit. What the page shows is their dry run; the versions they act at are those the
caller was shown (the API's ``version``) or, for the command, those it just read and printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core.exceptions import PermissionDenied

from merritt_queue.core import access
from merritt_queue.project.runtime import get_store
from steering.actions.accessqueue import read_queue, read_requests
from steering.actions.catalog import ACTIONS
from steering.actions.execution import execute
from steering.actions.kinds import Action, Scope, Target
from steering.actions.planning import PlanItem, plan
from steering.models import AdminAction
from steering.permissions import refusal

# The verbs of the API and the command, and the catalog's action each takes.
VERBS = {
    "requeue": "access.requeue",
    "delete": "access.delete",
    "cleanup": "access.cleanup",
    "pause": "access.pause",
    "unpause": "access.unpause",
}


class Refused(Exception):
    """The person may not take the action at all (their role, a read-only site)."""


@dataclass(frozen=True)
class Judged:
    action: Action
    items: list[PlanItem]
    missing: list[str]  # names that are no request or queue (gone, or mistyped)

    @property
    def applying(self) -> list[PlanItem]:
        return [i for i in self.items if i.applies]


def action_of(verb: str) -> Action:
    if verb not in VERBS:
        raise KeyError(f"{verb!r} is not an access action: one of {', '.join(VERBS)}")
    return ACTIONS[VERBS[verb]]


def judge(user, verb: str, names: list[str], older_than: timedelta | None = None) -> Judged:
    """What ``verb`` would do to ``names`` (request keys, or queue names) for ``user``, read
    now; for a cleanup with ``older_than`` and no names, every finished request that old."""
    action = action_of(verb)
    if problem := refusal(user, action):
        raise Refused(problem)
    store = get_store(init=False)
    if action.scope == Scope.ACCESS_QUEUE:
        targets, missing = [], []
        for name in names:
            if name in access.QUEUES:
                targets.append(Target(name, read_queue(store, name).status))
            else:
                missing.append(name)
        return Judged(action, plan(user, action, targets), missing)
    young: dict[str, str] = {}
    if verb == "cleanup" and older_than is not None:
        names, young = _old_enough(store, names, older_than)
    targets, missing = read_requests(store, names)
    items = [
        PlanItem(t, False, young[t.id]) if t.id in young else p
        for t, p in zip(targets, plan(user, action, targets), strict=True)
    ]
    return Judged(action, items, missing)


def _old_enough(store, names: list[str], older_than: timedelta) -> tuple[list[str], dict]:
    """The requests to judge for a cleanup (``names``, or every request), and why each that
    is too young (or not finished) may not go, in the core's words."""
    now = datetime.now(UTC)
    keys = [access.split_key(n) for n in names if _is_key(n)] if names else None
    wanted = keys if keys is not None else access.list_all(store.client)
    found = access.read_items(store.client, wanted)
    why = {}
    for key, item in found.items():
        if item is not None and (no := access.removable(item, older_than, now)):
            why[key] = f"it {no}"
    listed = names or [k for k, item in found.items() if item is not None]
    if not names:  # every request: only the finished ones are worth listing
        listed = [k for k in listed if found[k].status in access.REMOVABLE]  # type: ignore[union-attr]
    return listed, why


def _is_key(name: str) -> bool:
    try:
        access.split_key(name)
    except ValueError:
        return False
    return True


def take(user, verb: str, items: list[tuple[str, int | None]], reason: str, token: str):
    """Take ``verb`` on ``items`` (name, version shown) for ``user``; the audit record.
    ``token`` makes it idempotent: the same token again does nothing twice."""
    action = action_of(verb)
    try:
        return execute(user, action, items, reason, token=token)
    except PermissionDenied as e:
        raise Refused(str(e)) from None


def outcome(record: AdminAction) -> list[dict]:
    return [
        {
            "item": i.item_id,
            "result": i.result,
            "detail": i.detail,
            "before": i.before_status or None,
            "after": i.after_status or None,
        }
        for i in record.items.filter(part_of="").order_by("id")
    ]
