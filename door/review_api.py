"""``/api/v1/jobs/<jid>/review``: a destructive update's diff, approved or rejected over the
API by a bearer token's person, with the pages' rules (``steering.actions.reviewdoor``): the
operator role for the job's collection, a reason, the version shown, one decision per confirm.

``GET`` answers the job's review and, when the person may decide, a ``confirm`` value;
``POST`` takes ``decision`` (``approve`` or ``reject``), ``reason`` and that ``confirm``, as
form fields or JSON. A job the token's person may not read answers 404, as one that does not
exist.
"""

from __future__ import annotations

import json

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods
from kazoo.exceptions import KazooException

from door.tokens import with_token_user
from merritt_queue.core.errors import QueueError
from merritt_queue.core.tree import is_job_id
from steering.actions import reviewdoor
from ui.reading_scope import may_read


def _errors(problem: str, status: int) -> JsonResponse:
    return JsonResponse({"errors": [problem]}, status=status)


def _fields(request) -> dict:
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"{}")
        except ValueError as e:
            raise reviewdoor.Refused(f"the body is not valid JSON: {e}", 400) from None
        if not isinstance(data, dict):
            raise reviewdoor.Refused("the body must be a JSON object", 400)
        return {k: str(v) for k, v in data.items()}
    return {k: request.POST.get(k, "") for k in request.POST}


@csrf_exempt
@require_http_methods(["GET", "HEAD", "POST"])
@with_token_user
def job_review(request, user, jid: str):
    try:
        if not is_job_id(jid):
            raise reviewdoor.Refused(f"no job {jid[:100]!r} is in the queue", 404)
        job, collection = reviewdoor.read(jid)
        if not may_read(user, collection):
            raise reviewdoor.Refused(f"no job {jid[:100]!r} is in the queue", 404)
        if request.method != "POST":
            return JsonResponse(reviewdoor.shown(user, job, collection))
        fields = _fields(request)
        data = reviewdoor.confirmed(user, jid, fields.get("confirm", ""))
        record, repeated = reviewdoor.decide(
            user,
            jid,
            fields.get("decision", ""),
            fields.get("reason", ""),
            version=data["version"],
            token=data["token"],
        )
    except reviewdoor.Refused as e:
        return _errors(str(e), e.status)
    except (QueueError, KazooException) as e:
        return _errors(f"the queue is unavailable, nothing was written: {e}", 503)
    return JsonResponse(reviewdoor.outcome(record, repeated))
