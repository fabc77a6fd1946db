"""Deleting over the API, for a bearer token, and the two-person requests it makes.

``POST /api/v1/deletions`` (``action``: job.delete, batch.delete or batch.purge; ``ids``,
comma-separated; ``reason``; optional ``token``, so a retried call acts once) deletes at once
(200, the admin action's results), or, when ``MQ_TWO_PERSON_DELETION`` covers it, records a
request (202, the request). ``GET /api/v1/deletion-requests[/<id>]`` lists and shows them;
``POST /api/v1/deletion-requests/<id>/approve|reject|withdraw`` with a ``reason`` decides one.
The rules are the pages' (``steering.twoperson.requests``, ``steering.actions.execution``).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import JsonResponse, QueryDict
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe
from kazoo.exceptions import KazooException

from door.tokens import with_token_user
from merritt_queue.core.errors import QueueError
from steering.actions.catalog import ACTIONS
from steering.actions.execution import execute
from steering.actions.planning import plan
from steering.actions.selection import select
from steering.models import AdminAction, DeletionRequest
from steering.permissions import refusal
from steering.twoperson import policy, showing
from steering.twoperson import requests as life

DELETIONS = ("job.delete", "batch.delete", "batch.purge")
DECISIONS = {"approve": life.approve, "reject": life.reject, "withdraw": life.withdraw}


def _errors(problems: list[str], status: int) -> JsonResponse:
    return JsonResponse({"errors": problems}, status=status)


@csrf_exempt
@require_POST
@with_token_user
def deletions(request, user):
    name = request.POST.get("action", "")
    if name not in DELETIONS:
        return _errors([f"action {name[:40]!r}: give one of {', '.join(DELETIONS)}"], 400)
    action = ACTIONS[name]
    if problem := refusal(user, action):
        return _errors([problem], 403)
    reason = request.POST.get("reason", "").strip()
    if not reason:
        return _errors(["a reason is required (it is recorded in the audit trail)"], 400)
    request.GET = QueryDict(mutable=True)
    request.GET["ids"] = request.POST.get("ids", "")
    selection = select(request, action)
    judged = plan(user, action, selection.targets)
    items: list[list[Any]] = [[p.target.id, p.target.version] for p in judged if p.applies]
    refused = [{"id": p.target.id, "why": p.why} for p in judged if not p.applies]
    refused += [{"id": i, "why": "not known to the queue's mirror"} for i in selection.missing]
    if not items:
        return JsonResponse(
            {"errors": ["the action applies to none of these"], "refused": refused}, status=409
        )
    token = _token(request, user)
    try:
        if policy.required(name):
            shown = showing.listed(action, items)
            req, _ = life.create(
                user,
                name,
                reason,
                token=token,
                items=items,
                shown=shown,
                collections=showing.collections(shown, action),
            )
            return JsonResponse({**described(req), "refused": refused}, status=202)
        record = execute(user, action, [(i, v) for i, v in items], reason, token=token)
    except PermissionDenied as e:
        return _errors([str(e)], 403)
    except (QueueError, KazooException) as e:
        return _errors([f"the queue is unavailable: {e}"], 503)
    return JsonResponse({**outcome(record), "refused": refused})


def _token(request, user) -> str:
    """The call's token: the client's (a retry acts once), kept apart from other people's."""
    given = request.POST.get("token", "").strip()[:40]
    return f"api-{user.pk}-{given}" if given else uuid.uuid4().hex


def outcome(record: AdminAction) -> dict:
    items = record.items.filter(part_of="").order_by("id")
    return {
        "admin_action": record.pk,
        "action": record.action,
        "by": record.username,
        "done": record.done,
        "skipped": record.skipped,
        "failed": record.failed,
        "items": [{"id": i.item_id, "result": i.result, "detail": i.detail} for i in items],
    }


def described(req: DeletionRequest) -> dict:
    return {
        "id": req.pk,
        "action": req.action,
        "kind": req.kind,
        "state": req.state,
        "count": req.count,
        "collections": req.collections,
        "requested_by": req.requester_name,
        "reason": req.reason,
        "created": req.created.isoformat(),
        "selection": req.selection,
        "items": [
            {k: row.get(k) for k in ("id", "collection", "status", "version", "now", "changed")}
            for row in showing.now(req)
        ],
        "request_admin_action": req.request_record_id,
        "decided_by": req.approver_name,
        "decided": req.decided.isoformat() if req.decided else None,
        "decision_reason": req.decision_reason,
        "decision": outcome(req.decision_record) if req.decision_record else None,
    }


@require_safe
@with_token_user
def requests_list(request, user):
    life.expire_old()
    rows = DeletionRequest.objects.all()
    if request.GET.get("all") != "1":
        rows = rows.filter(state=DeletionRequest.REQUESTED)
    return JsonResponse(
        {"requests": [described(r) for r in rows[:500] if showing.readable(user, r)]}
    )


def _request_of(user, pk: int) -> DeletionRequest | None:
    req = DeletionRequest.objects.filter(pk=pk).first()
    return req if req is not None and showing.readable(user, req) else None


@require_safe
@with_token_user
def request_detail(request, user, pk: int):
    life.expire_old()
    req = _request_of(user, pk)
    if req is None:
        return _errors([f"no deletion request {pk} is known to this token"], 404)
    return JsonResponse(described(req))


@csrf_exempt
@require_POST
@with_token_user
def decide(request, user, pk: int, verb: str):
    req = _request_of(user, pk)
    if req is None or verb not in DECISIONS:
        return _errors([f"no deletion request {pk} is known to this token"], 404)
    token = _token(request, user)
    try:
        DECISIONS[verb](req, user, request.POST.get("reason", ""), token=token)
    except life.Refused as e:
        return _errors([str(e)], e.status)
    except PermissionDenied as e:
        return _errors([str(e)], 403)
    except (QueueError, KazooException) as e:
        return _errors([f"the queue is unavailable: {e}"], 503)
    req.refresh_from_db()
    return JsonResponse(described(req))
