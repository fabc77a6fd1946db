"""``POST /api/v1/manifests/check``: a manifest judged as a submission would judge it.

Authenticated as the submission API (a bearer token of a user who may submit); nothing is
written. Its length is judged before anything reads it, as a submission's is
(``door.middleware``). The body is the manifest itself, or a multipart form with its ``file``.
"""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from door import rights
from door.ratelimit import refusal as rate_refusal
from door.tokens import with_token_user
from merritt_queue.deposit.manifestcheck import check_manifest
from pipeline.capacity import batch_row_limit

RATE_SETTING = "MQ_MANIFEST_CHECKS_PER_MINUTE"


def too_often(user) -> tuple[str, int] | None:
    """Why ``user`` may not have another manifest checked this minute, and the seconds to
    wait; the API and the page count together."""
    return rate_refusal("manifest checks", user, getattr(settings, RATE_SETTING), RATE_SETTING)


def manifest_bytes(request, limit: int) -> tuple[bytes | None, tuple[int, str] | None]:
    """The manifest sent, or the status and reason why it cannot be read.

    The body's length was judged by its headers before anything read it
    (``door.middleware``); a bare body is read from the stream, not ``request.body``,
    whose own cap (DATA_UPLOAD_MAX_MEMORY_SIZE) is meant for forms, not manifests.
    """
    if request.content_type == "multipart/form-data":
        upload = request.FILES.get("file")
        if upload is None:
            return None, (400, "the form has no 'file' field holding the manifest")
        if upload.size > limit:
            return None, (413, f"the manifest is {upload.size} bytes, over {limit} bytes")
        return upload.read(), None
    return request.read(limit + 1), None


@csrf_exempt  # a token API has no session cookie, so there is no CSRF to forge
@require_POST
@with_token_user
def check_manifest_api(request, user):
    if refusal := rights.submit_refusal(user, None):
        return JsonResponse({"errors": [refusal]}, status=403)
    if limited := too_often(user):
        response = JsonResponse({"errors": [limited[0]]}, status=429)
        response["Retry-After"] = str(limited[1])
        return response
    limit = settings.MQ_MAX_MANIFEST_BYTES
    data, refused = manifest_bytes(request, limit)
    if refused is not None:
        return JsonResponse({"errors": [refused[1]]}, status=refused[0])
    report = check_manifest(data or b"", max_bytes=limit, max_batch_rows=batch_row_limit())
    return JsonResponse(report.as_json())
