"""An approval decision taken outside the confirmation page: the API (``door.approval_api``)
and ``manage.py approve_batch``. Both name the batch and the status version the person saw
(the mirror's by default), and go through ``execute`` as the page's button does: the same
role and collection checks, the required reason, the version check and the audit. The
``token`` makes a request sent twice act once."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from batches.filters import awaiting_q
from batches.models import Batch
from steering.actions.approvals import APPROVE, REJECT
from steering.actions.execution import execute
from steering.models import AdminAction
from steering.permissions import collections_of, refusal, role_of
from ui.reading_scope import readable_rows


class Refused(Exception):
    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Decision:
    record: AdminAction
    result: str  # done, skipped or failed
    detail: str
    status: str  # the batch's status after it


def awaiting(user) -> QuerySet:
    """The batches awaiting approval that ``user`` may act on (an operator limited to some
    collections sees only theirs), oldest first; none for a role below the decision's (a
    depositor follows their own batch through its status). Read-only mode still lists them."""
    if role_of(user) < APPROVE.role:
        return Batch.objects.none()
    rows = readable_rows(user, Batch.objects.filter(awaiting_q()).order_by("bid"))
    acting = collections_of(user)
    return rows if acting is None else rows.filter(collection__in=acting)


def awaiting_all() -> QuerySet:
    """Every batch awaiting approval (the site's own command line, no person's scope)."""
    return Batch.objects.filter(awaiting_q()).order_by("bid")


def decide(
    user, bid: str, *, approve: bool, reason: str, token: str, version: int | None = None
) -> Decision:
    action = APPROVE if approve else REJECT
    row = readable_rows(user, Batch.objects.filter(bid=bid)).first()
    if row is None:
        raise Refused(f"no batch {bid[:100]!r} is known to you", 404)
    if problem := refusal(user, action):
        raise Refused(problem, 403)
    if not reason.strip():
        raise Refused("a reason is required (it is recorded and sent to the depositor)", 400)
    shown = row.status_version if version is None else version
    try:
        record = execute(user, action, [(bid, shown)], reason.strip(), token=token)
    except PermissionDenied as e:
        raise Refused(str(e), 403) from None
    item = record.items.filter(part_of="").order_by("id").first()
    if item is None:
        return Decision(record, "failed", "not acted on", row.status)
    return Decision(record, item.result, item.detail, item.after_status or item.before_status)
