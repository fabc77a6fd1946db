"""A deletion request's life: asked (``create``), then approved, rejected or withdrawn once,
or expired. Each half is an ``AdminAction``: the request's own (``deletion.request``, its items
the items asked for) and the decision's (the deletion run by the approver when approved, its
params naming the request; ``deletion.reject`` or ``deletion.withdraw`` otherwise).

Approving runs the very action the requester confirmed, through ``steering.actions.execution``
(or, for a cleanup, ``steering.maintenance.operations``), with the items at the versions the
request judged: an item changed since is skipped and said, never deleted blindly. A decision is
claimed by one conditional update of the request's state, so two clicks, two tabs or two
administrators decide it once.
"""

from __future__ import annotations

import logging
import uuid

import django_rq
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone
from redis.exceptions import RedisError

from steering import tasks
from steering.actions import wholefilter
from steering.actions.catalog import ACTIONS
from steering.actions.execution import WITHIN_KEY, run_items, start
from steering.maintenance import operations as m
from steering.models import AdminAction, AdminActionItem, DeletionRequest
from steering.permissions import collections_of, refusal, role_of
from steering.roles import Role
from steering.twoperson import policy, showing

log = logging.getLogger(__name__)
R = DeletionRequest


class Refused(Exception):
    """Why a person may not take this step on a request now; ``status`` the HTTP answer."""

    def __init__(self, why: str, status: int = 403):
        super().__init__(why)
        self.status = status


def label(action_name: str) -> str:
    if action_name == "cleanup":
        return "Clean up"
    action = ACTIONS[action_name]
    return f"{action.label} ({action.scope})"


def create(
    user,
    action_name: str,
    reason: str,
    *,
    token: str,
    items=(),
    shown=None,
    params=None,
    selection="",
    count=0,
    collections=(),
) -> tuple[DeletionRequest, bool]:
    """Record the request and its audited half; the request and whether it is new (False:
    this confirmation made it already)."""
    made = R.objects.filter(token=token).first()
    if made is not None:
        return made, False
    problem = _asking_refusal(user, action_name)
    if problem:
        raise PermissionDenied(problem)
    if not reason.strip():
        raise ValueError("a reason is required")
    scope = "queue" if action_name == "cleanup" else ACTIONS[action_name].scope
    shown, params = shown or {}, dict(params or {})
    within = collections_of(user)
    if within is not None and action_name != "cleanup":  # approved, it acts where both may
        params[WITHIN_KEY] = sorted(within)
    req = R(
        kind=policy.KIND_OF[action_name],
        action=action_name,
        items=[list(pair) for pair in items],
        shown=shown,
        params=params,
        selection=selection,
        count=count or len(items),
        collections=list(collections),
        requester=user,
        requester_name=user.get_username(),
        reason=reason.strip(),
        token=token,
    )
    try:
        return _record(req, scope), True
    except IntegrityError:  # a second submit of this confirmation inserted it meanwhile
        return R.objects.get(token=token), False


def _record(req: DeletionRequest, scope: str) -> DeletionRequest:
    """Save ``req`` and its audited half, or neither."""
    user, action_name, token, shown = req.requester, req.action, req.token, req.shown
    params = req.params
    with transaction.atomic():
        req.save()
        record = AdminAction.objects.create(
            user=user,
            username=req.requester_name,
            action=policy.REQUEST,
            scope=scope,
            reason=req.reason,
            selection=req.selection,
            params={"request": req.pk, "deletes": action_name, **params},
            total=req.count,
            done=req.count,
            token=f"request-{token}"[:64],
            finished=timezone.now(),
        )
        AdminActionItem.objects.bulk_create(
            [
                AdminActionItem(
                    admin_action=record,
                    item_id=row["id"],
                    collection=row.get("collection", ""),
                    before_status=row.get("status", ""),
                    before_version=row.get("version"),
                    result="done",
                    detail=f"requested: {label(action_name)}, for a second administrator",
                )
                for row in shown.get("rows", [])
                if "id" in row
            ],
            batch_size=500,
        )
        req.request_record = record
        req.save(update_fields=["request_record"])
    return req


def _asking_refusal(user, action_name: str) -> str | None:
    if action_name == "cleanup":
        return m.refusal(user, m.OPERATIONS[m.CLEANUP])
    return refusal(user, ACTIONS[action_name])


def expire_old() -> int:
    """Requests older than ``MQ_TWO_PERSON_EXPIRY_HOURS`` left undecided: expired."""
    if settings.READ_ONLY:  # nothing is written then; the refusals say read-only
        return 0
    cutoff = timezone.now() - policy.expiry()
    return R.objects.filter(state=R.REQUESTED, created__lt=cutoff).update(
        state=R.EXPIRED, decided=timezone.now()
    )


def refusal_to(verb: str, req: DeletionRequest, user) -> str | None:
    """Why ``user`` may not ``verb`` (approve, reject, withdraw) ``req`` now, or None."""
    expire_old()
    req.refresh_from_db(fields=["state", "approver_name", "decided"])
    if settings.READ_ONLY:
        return "the queue is read-only at the moment: no request can be decided"
    if req.state != R.REQUESTED:
        by = f" by {req.approver_name}" if req.approver_name else ""
        when = f" on {req.decided:%Y-%m-%d %H:%M}" if req.decided else ""
        return f"this request was {req.state}{by}{when}: nothing more can be done with it"
    mine = user.pk is not None and user.pk == req.requester_id
    if verb == "withdraw":
        return None if mine else "only the administrator who requested it may withdraw it"
    if mine:
        return (
            "you requested it: a second administrator must approve or reject it "
            "(you may withdraw it)"
        )
    if role_of(user) < Role.ADMINISTRATOR:
        return f"deciding a deletion request needs the {Role.ADMINISTRATOR} role"
    scope = collections_of(user)
    if scope is not None and req.action != "cleanup" and showing.names_unknown(req):
        return (
            "some of its items name no collection known here: only an administrator of "
            "every collection may decide it"
        )
    outside = sorted(set(req.collections) - scope) if scope is not None else []
    if outside:
        return f"collection {', '.join(outside)} is outside your collections"
    return None


def _claim(req: DeletionRequest, user, state: str, reason: str) -> None:
    """Take the decision, or Refused (409) when someone (or an earlier click) took it."""
    claimed = R.objects.filter(pk=req.pk, state=R.REQUESTED).update(
        state=state,
        approver=user,
        approver_name=user.get_username(),
        decided=timezone.now(),
        decision_reason=reason,
    )
    if not claimed:
        req.refresh_from_db()
        raise Refused(f"this request was {req.state} meanwhile: nothing was done", 409)
    req.refresh_from_db()


def _checked(verb: str, req: DeletionRequest, user, reason: str, token: str):
    """The decision this token made already, or None once every check passed."""
    used = AdminAction.objects.filter(token=token).first()
    if used is not None:
        return used
    problem = refusal_to(verb, req, user)
    if problem:
        raise Refused(problem, 409 if req.state != R.REQUESTED else 403)
    if not reason.strip():
        raise Refused("a reason is required", 400)
    return None


def approve(req: DeletionRequest, user, reason: str, *, token: str = "") -> AdminAction:
    """Run the requested deletion as ``user``; the deletion's admin action."""
    token = token or uuid.uuid4().hex
    used = _checked("approve", req, user, reason, token)
    if used is not None:
        return used
    links = {
        "deletion_request": req.pk,
        "request_record": req.request_record_id,
        "requested_by": req.requester_name,
    }
    if req.action == "cleanup":
        return _approve_cleanup(req, user, reason.strip(), token, links)
    action = ACTIONS[req.action]
    items = [(i, v) for i, v in req.items]
    with transaction.atomic():
        _claim(req, user, R.APPROVED, reason.strip())
        record, _ = start(
            user,
            action,
            items,
            reason,
            token=token,
            params={**req.params, **links},
            selection=req.selection,
        )
        req.decision_record = record
        req.save(update_fields=["decision_record"])
    count = int(req.params.get(wholefilter.COUNTED_KEY, 0)) or len(items)
    if count <= settings.MQ_BULK_INLINE_MAX:
        return run_items(record)
    try:
        tasks.enqueue(record, django_rq.get_connection("default"))
    except RedisError:
        log.exception("could not queue admin action %s; running it here", record.pk)
        run_items(record)
    return record


def _approve_cleanup(req, user, reason, token, links) -> AdminAction:
    with transaction.atomic():
        _claim(req, user, R.APPROVED, reason)
        try:
            record, new = m.prepare(
                user, m.OPERATIONS[m.CLEANUP], {**req.params, **links}, reason, token=token
            )
        except m.AlreadyRunning as e:
            raise Refused(f"{e}: approve it once that one has finished", 409) from None
        req.decision_record = record
        req.save(update_fields=["decision_record"])
    # Queued once committed: a worker taking it before would find no record and drop it.
    if new:
        m.queue(record)
    return record


def reject(req: DeletionRequest, user, reason: str, *, token: str = "") -> AdminAction:
    return _close("reject", R.REJECTED, policy.REJECT, req, user, reason, token)


def withdraw(req: DeletionRequest, user, reason: str, *, token: str = "") -> AdminAction:
    return _close("withdraw", R.WITHDRAWN, policy.WITHDRAW, req, user, reason, token)


def _close(verb, state, name, req, user, reason, token) -> AdminAction:
    """A decision that deletes nothing, audited as its own admin action."""
    token = token or uuid.uuid4().hex
    used = _checked(verb, req, user, reason, token)
    if used is not None:
        return used
    scope = "queue" if req.action == "cleanup" else ACTIONS[req.action].scope
    with transaction.atomic():
        _claim(req, user, state, reason.strip())
        record = AdminAction.objects.create(
            user=user,
            username=user.get_username(),
            action=name,
            scope=scope,
            reason=reason.strip(),
            params={
                "request": req.pk,
                "request_record": req.request_record_id,
                "deletes": req.action,
            },
            total=req.count,
            skipped=req.count,
            token=token,
            finished=timezone.now(),
        )
        AdminActionItem.objects.bulk_create(
            [
                AdminActionItem(
                    admin_action=record,
                    item_id=i.item_id,
                    collection=i.collection,
                    before_status=i.before_status,
                    before_version=i.before_version,
                    result="skipped",
                    detail=f"not deleted: the request was {state}",
                )
                for i in (req.request_record.items.all() if req.request_record else [])
            ]
        )
        req.decision_record = record
        req.save(update_fields=["decision_record"])
    return record
