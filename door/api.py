"""The submission API: ``POST /api/v1/batches`` with a bearer token, JSON or multipart."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from kazoo.exceptions import KazooException

from door.manifest_door import ManifestRefused
from door.middleware import length_problem
from door.submission import (
    READ_ONLY_PROBLEM,
    SubmissionError,
    Upload,
    submit,
)
from door.tokens import NO_TOKEN, note_use, token_of
from merritt_queue.core.errors import QueueError

JSON = "application/json"
FORMS = ("multipart/form-data", "application/x-www-form-urlencoded")


class _Refused(Exception):
    """The request cannot be read as a submission; nothing was read further or written."""

    def __init__(self, status: int, problems: list[str]):
        super().__init__("; ".join(problems))
        self.status, self.problems = status, problems


def _payload(request) -> tuple[object, Upload | None]:
    """The fields (and upload) of the request; ``_Refused`` before reading a body it refuses."""
    kind = request.content_type
    if kind != JSON and kind not in FORMS:
        raise _Refused(
            415,
            [
                f"unsupported Content-Type {kind or '(none)'!r}: send {JSON}, or "
                "multipart/form-data with the payload in the field 'file'"
            ],
        )
    if problem := length_problem(request, api=True):  # the guard has judged it already
        status, reason = problem
        raise _Refused(status, [reason])
    try:
        return _json_payload(request) if kind == JSON else _form_payload(request)
    except SuspiciousOperation as e:  # Django's own limits: too many fields, body too big
        raise _Refused(400, [f"the request was refused: {e}"]) from None
    except MultiPartParserError as e:
        raise _Refused(400, [f"the multipart body is malformed: {e}"]) from None


def _json_payload(request) -> tuple[object, None]:
    body = request.body
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Refused(
            400, [f"the body is not UTF-8: byte 0x{body[e.start]:02x} at offset {e.start}"]
        ) from None
    try:
        data = json.loads(text or "null")
    except ValueError as e:
        raise _Refused(400, [f"the body is not valid JSON: {e}"]) from None
    if isinstance(data, dict) and "file" in data:
        raise _Refused(400, ["file is accepted only as a multipart/form-data upload, not in JSON"])
    return data, None


def _form_payload(request) -> tuple[dict, Upload | None]:
    problems = [
        f"field {k!r} is given {len(request.POST.getlist(k))} times; give it once"
        for k in request.POST
        if len(request.POST.getlist(k)) > 1
    ]
    files = request.FILES.getlist("file")
    if len(files) > 1:
        problems.append(f"{len(files)} files were uploaded; a submission takes one")
    problems += [
        f"unknown upload field {k!r} (the payload goes in 'file')"
        for k in request.FILES
        if k != "file"
    ]
    if problems:
        raise _Refused(400, problems)
    data = {k: request.POST.get(k) for k in request.POST}
    f = files[0] if files else None
    return data, Upload(f.name, f, f.size) if f else None


# A token API has no session cookie, so there is no CSRF to forge.
@csrf_exempt
@require_POST
def submit_batch(request):
    if settings.READ_ONLY:  # before the body is read
        return JsonResponse({"errors": [READ_ONLY_PROBLEM]}, status=503)
    token = token_of(request)
    if token is None:
        return JsonResponse({"errors": [NO_TOKEN]}, status=401)
    try:
        data, upload = _payload(request)
    except _Refused as e:
        return JsonResponse({"errors": e.problems}, status=e.status)
    try:
        result = submit(data, upload, by=token.user)
    except ManifestRefused as e:  # every problem, and the check API's own list of them
        return JsonResponse({"errors": e.problems, "manifest": e.report}, status=e.status)
    except SubmissionError as e:
        refused = JsonResponse({"errors": e.problems}, status=e.status)
        if e.retry_after is not None:
            refused["Retry-After"] = str(e.retry_after)
        return refused
    except (QueueError, KazooException) as e:
        return JsonResponse(
            {"errors": [f"the queue is unavailable, nothing was written: {e}"]}, status=503
        )
    note_use(token)
    body: dict[str, object] = {
        "batch_id": result.bid,
        "batchID": result.batch_uuid,
        "duplicate": result.duplicate,
    }
    if result.duplicate:  # what became of it: a Completed or Failed one may be run again
        body |= {"status": result.status, "rerun_possible": result.rerunnable}
    if result.awaiting_approval:
        body["awaiting_approval"] = True
    if result.webhook:
        body["webhook"] = result.webhook
    return JsonResponse(body, status=200 if result.duplicate else 201)
