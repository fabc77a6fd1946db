"""The access queue's API, with a bearer token (``door.tokens``), as the pages show and
steer it:

- ``GET /api/v1/access``: the requests (the list page's filters, ``page``), from the mirror;
- ``GET /api/v1/access/<queue>/<qid>``: one request, its token fields and history;
- ``POST /api/v1/access/<queue>/<qid>/<requeue|delete|cleanup>``,
  ``POST /api/v1/access/queues/<queue>/<pause|unpause>`` and
  ``POST /api/v1/access/cleanup`` (every finished request ``older_than_days``): a JSON body
  with ``reason`` (required), ``version`` (a request's status version as the caller read it:
  the stale-version guard), ``dry_run`` (what it would do, nothing written) and
  ``request_id`` (the same id again does nothing twice).

Each action is judged and taken as the confirmation page does (``accessui.steer``).
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from datetime import timedelta

from django.conf import settings
from django.core.paginator import Paginator
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from kazoo.exceptions import KazooException

from access.models import AccessEvent, AccessRequest
from accessui import steer
from accessui.filters import MAX_DAYS, AccessFilter
from accessui.views import pause_states
from door.submission import READ_ONLY_PROBLEM
from door.tokens import with_token_user
from merritt_queue.core.errors import QueueError
from steering.models import AdminAction
from ui.reading_scope import in_readable, may_read

PER_PAGE = 100


def _utc(value) -> str | None:
    return value.isoformat() if value else None


def row_body(row: AccessRequest) -> dict:
    return {
        "id": row.key,
        "queue": row.queue,
        "qid": row.qid,
        "status": row.status or None,
        "version": row.status_version,
        "message": row.message,
        "locked": row.locked,
        "created": _utc(row.created_at),
        "last_change": _utc(row.status_changed_at),
        "token": row.token,
        "token_status": row.token_status,
        "size": row.size,
        "delivery_node": row.delivery_node,
        "anticipated_availability": row.anticipated_availability,
        "url": row.url,
        "ark": row.ark,
        "collection": row.collection,
        "removed": _utc(row.removed_at),
    }


@require_GET
@with_token_user
def list_requests(request, user):
    rows = in_readable(user, AccessRequest.objects.all())
    filterset = AccessFilter(request.GET, queryset=rows)
    if not filterset.is_valid():
        return JsonResponse({"errors": _form_errors(filterset.form)}, status=400)
    page = Paginator(filterset.qs.order_by("queue", "qid"), PER_PAGE).get_page(
        request.GET.get("page")
    )
    return JsonResponse(
        {
            "count": page.paginator.count,
            "page": page.number,
            "pages": page.paginator.num_pages,
            "paused": pause_states(),
            "requests": [row_body(r) for r in page.object_list],
        }
    )


@require_GET
@with_token_user
def request_detail(request, user, queue: str, qid: str):
    row = AccessRequest.objects.filter(queue=queue, qid=qid).first()
    if row is None or not may_read(user, row.collection):
        return JsonResponse({"errors": [f"no access request {queue}/{qid}"]}, status=404)
    events = AccessEvent.objects.filter(key=row.key).order_by("status_version", "at")
    history = [
        {
            "at": _utc(e.at),
            "from": e.from_status or None,
            "to": e.to_status,
            "by": e.actor,
            "message": e.message,
            "version": e.status_version,
        }
        for e in events
    ]
    return JsonResponse(row_body(row) | {"token_fields": row.token_data, "history": history})


@csrf_exempt  # a token API has no session cookie, so there is no CSRF to forge
@require_POST
@with_token_user
def request_action(request, user, queue: str, qid: str, verb: str):
    if verb not in ("requeue", "delete", "cleanup"):
        return JsonResponse({"errors": [f"{verb!r} is not an action on a request"]}, status=404)
    return _act(request, user, verb, [f"{queue}/{qid}"], versioned=True)


@csrf_exempt
@require_POST
@with_token_user
def queue_action(request, user, queue: str, verb: str):
    if verb not in ("pause", "unpause"):
        return JsonResponse({"errors": [f"{verb!r} is not an action on a queue"]}, status=404)
    return _act(request, user, verb, [queue], versioned=False)


@csrf_exempt
@require_POST
@with_token_user
def cleanup(request, user):
    return _act(request, user, "cleanup", [], versioned=False, cleanup=True)


def _act(request, user, verb: str, names: list[str], *, versioned: bool, cleanup=False):
    if settings.READ_ONLY:
        return JsonResponse({"errors": [READ_ONLY_PROBLEM]}, status=503)
    try:
        body = json.loads(request.body or b"{}")
    except ValueError as e:
        return JsonResponse({"errors": [f"the body is not valid JSON: {e}"]}, status=400)
    if not isinstance(body, dict):
        return JsonResponse({"errors": ["the body must be a JSON object"]}, status=400)
    dry_run = body.get("dry_run") is True
    reason = str(body.get("reason") or "").strip()
    problems = [] if dry_run or reason else ["reason is required (it is recorded in the audit)"]
    version = body.get("version")
    if versioned and not dry_run and not isinstance(version, int):
        problems.append("version is required: the request's status version as you read it")
    older_than = None
    if cleanup:
        days = body.get("older_than_days")
        if not _days(days):
            problems.append(f"older_than_days is required: a number of days from 0 to {MAX_DAYS}")
        else:
            older_than = timedelta(days=days)
    if problems:
        return JsonResponse({"errors": problems}, status=400)
    token = _token(user, body)
    if not dry_run and (used := AdminAction.objects.filter(token=token).first()) is not None:
        return _result(used)  # a retry of the same call: what it did, nothing done again
    try:
        judged = steer.judge(user, verb, names, older_than)
        if judged.missing:
            what = "access request" if versioned else "access queue (small or large)"
            return JsonResponse({"errors": [f"no {what} {judged.missing[0]}"]}, status=404)
        shown = _shown(judged)
        if dry_run:
            return JsonResponse({"dry_run": True, "action": judged.action.name, "items": shown})
        items = [(p.target.id, version if versioned else p.target.version) for p in judged.applying]
        if not judged.applying:  # nothing it applies to as it is now: say why, write nothing
            if cleanup:
                return JsonResponse({"action": None, "done": 0, "items": shown})
            return JsonResponse({"errors": [shown[0]["why"]], "items": shown}, status=409)
        record = steer.take(user, verb, items, reason, token)
    except steer.Refused as e:
        return JsonResponse({"errors": [str(e)]}, status=403)
    except (QueueError, KazooException) as e:
        return JsonResponse({"errors": [f"the queue is unavailable: {e}"]}, status=503)
    return _result(record)


def _result(record: AdminAction) -> JsonResponse:
    return JsonResponse(
        {
            "action": record.pk,
            "done": record.done,
            "skipped": record.skipped,
            "failed": record.failed,
            "items": steer.outcome(record),
        },
        status=200 if record.done else 409,
    )


def _shown(judged: steer.Judged) -> list[dict]:
    return [
        {
            "item": p.target.id,
            "status": p.target.status,
            "version": p.target.version,
            "applies": p.applies,
            "why": p.why,
        }
        for p in judged.items
    ]


def _days(value) -> bool:
    """A number of days a timedelta holds: JSON's ``true`` is no number, and Python reads
    ``NaN`` and ``Infinity`` in JSON."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and 0 <= value <= MAX_DAYS


def _token(user, body: dict) -> str:
    """The audit record's token: one a client's ``request_id`` names makes a retry of the
    same call do nothing twice. Hashed whole, so that two long ids alike in their first
    characters stay two calls."""
    given = str(body.get("request_id") or "").strip()
    if not given:
        return uuid.uuid4().hex
    return f"api-{user.pk}-{hashlib.sha256(given.encode()).hexdigest()}"[:64]


def _form_errors(form) -> list[str]:
    return [f"{name}: {error}" for name, errors in form.errors.items() for error in errors]
