"""Approval before a batch starts, over the API, for a bearer token: the batches awaiting
approval the token's person may read, and an operator's decision on one, with a reason
(``steering.actions.decisions``: the rules and the audit of the page's buttons).
"""

from __future__ import annotations

import hashlib
import json
import uuid

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe

from door.tokens import with_token_user
from steering.actions import decisions

DECISIONS = {"approve": True, "reject": False}


def _errors(problems: list[str], status: int) -> JsonResponse:
    return JsonResponse({"errors": problems}, status=status)


@require_safe
@with_token_user
def awaiting(request, user):
    rows = decisions.awaiting(user)
    return JsonResponse(
        {
            "batches": [
                {
                    "batch_id": b.bid,
                    "batchID": b.uuid or None,
                    "collection": b.collection,
                    "profile": b.profile,
                    "submitter": b.submitter,
                    "status_version": b.status_version,
                    "requested_at": (b.approval or {}).get("requested_at"),
                    "summary": (b.approval or {}).get("summary"),
                }
                for b in rows
            ]
        }
    )


@csrf_exempt
@require_POST
@with_token_user
def decide(request, user, bid: str):
    """JSON ``{"decision": "approve"|"reject", "reason", "status_version"?, "request_id"?}``.

    ``status_version`` is the version the caller saw (the list's); a decision made since
    skips this one (409). ``request_id`` makes a retried request act once."""
    try:
        data = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return _errors(["the body must be JSON"], 400)
    if not isinstance(data, dict) or data.get("decision") not in DECISIONS:
        return _errors(['"decision" must be "approve" or "reject"'], 400)
    version = data.get("status_version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        return _errors(['"status_version" must be an integer'], 400)
    reason = data.get("reason")
    if not isinstance(reason, str):
        reason = ""
    try:
        done = decisions.decide(
            user,
            bid,
            approve=DECISIONS[data["decision"]],
            reason=reason,
            token=_token(user, data.get("request_id"), bid, data["decision"]),
            version=version,
        )
    except decisions.Refused as e:
        return _errors([str(e)], e.status)
    body = {
        "batch_id": bid,
        "admin_action": done.record.pk,
        "result": done.result,
        "detail": done.detail,
        "status": done.status,
    }
    return JsonResponse(body, status=200 if done.result == "done" else 409)


def _token(user, request_id, bid: str, decision: str) -> str:
    """The action's token: the caller's ``request_id`` (per person), else a fresh one. The
    batch and the decision are part of it: a ``request_id`` used again for another batch or
    the other decision is a new request, never the earlier one's answer."""
    if not isinstance(request_id, str) or not request_id:
        return uuid.uuid4().hex
    key = json.dumps(["approval", user.pk, request_id, bid, decision])
    return hashlib.sha256(key.encode()).hexdigest()
