"""``POST /api/v1/manifests/check``: a manifest judged as a submission would judge it.

Authenticated as the submission API (a bearer token of a user who may submit); nothing is
written. Its length is judged before anything reads it, as a submission's is
(``door.middleware``). The body is the manifest itself, or a multipart form with its ``file``.
With ``?profile=P`` (a profile of a collection the user may submit to) the answer also holds
the pre-flight summary of submitting it with P (``batches.preflight``), under ``preflight``.
"""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from batches.models import Profile
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


def profile_refusal(user, name: str) -> tuple[int, str] | None:
    """Why ``user`` may not have a pre-flight with profile ``name``: an unknown profile, or
    one of a collection outside their scope (whose objects the summary would show)."""
    collection = Profile.objects.filter(name=name).values_list("collection", flat=True).first()
    if collection is None:
        return 400, f"no profile {name!r}"
    if refusal := rights.submit_refusal(user, collection):
        return 403, refusal
    return None


def preflight(data: bytes, profile: str) -> dict:
    """``batches.preflight.summarise`` of ``data``, for a profile ``profile_refusal`` let
    through."""
    # The batch app's: the door imports it here, as the one use of it (tests/house/test_layers).
    from batches.preflight import summarise

    return summarise(data, profile=profile)


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
    profile = request.GET.get("profile", "")
    if profile and (refused := profile_refusal(user, profile)):
        return JsonResponse({"errors": [refused[1]]}, status=refused[0])
    report = check_manifest(data or b"", max_bytes=limit, max_batch_rows=batch_row_limit())
    answer = report.as_json()
    if profile:
        answer["preflight"] = preflight(data or b"", profile)
    return JsonResponse(answer)
