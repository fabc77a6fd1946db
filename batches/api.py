"""The submission API: ``POST /api/v1/batches`` with a bearer token, JSON or multipart."""

from __future__ import annotations

import json

from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from kazoo.exceptions import KazooException

from merritt_queue.errors import QueueError

from .models import ApiToken
from .submission import SubmissionError, Upload, submit


def _token(request) -> ApiToken | None:
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() not in ("bearer", "token") or not key.strip():
        return None
    return ApiToken.lookup(key.strip())


def _payload(request) -> tuple[dict | None, Upload | None, str | None]:
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"null")
        except (ValueError, UnicodeDecodeError) as e:
            return None, None, f"the body is not valid JSON: {e}"
        return data, None, None
    data = {k: request.POST.get(k) for k in request.POST}
    f = request.FILES.get("file")
    return data, Upload(f.name, f, f.size) if f else None, None


# A token API has no session cookie, so there is no CSRF to forge.
@csrf_exempt
@require_POST
def submit_batch(request):
    token = _token(request)
    if token is None:
        return JsonResponse(
            {"errors": ["a valid API token is required (Authorization: Bearer <token>)"]},
            status=401,
        )
    data, upload, error = _payload(request)
    if error:
        return JsonResponse({"errors": [error]}, status=400)
    if isinstance(data, dict) and "submitter" not in data:
        data["submitter"] = token.user.get_username()
    try:
        result = submit(data, upload)
    except SubmissionError as e:
        return JsonResponse({"errors": e.problems}, status=400)
    except (QueueError, KazooException) as e:
        return JsonResponse(
            {"errors": [f"the queue is unavailable, nothing was written: {e}"]}, status=503
        )
    ApiToken.objects.filter(pk=token.pk).update(last_used=timezone.now())
    body = {"batch_id": result.bid, "batchID": result.batch_uuid, "duplicate": result.duplicate}
    return JsonResponse(body, status=200 if result.duplicate else 201)
