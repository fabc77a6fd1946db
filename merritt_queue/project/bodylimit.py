"""Every request's body judged by its headers, on every path, before anything reads it.

Django reads a form's whole body before the view runs (the CSRF check reads ``request.POST``;
a multipart body is spooled to temporary files), and its own limits
(``DATA_UPLOAD_MAX_MEMORY_SIZE``, ``FILE_UPLOAD_MAX_MEMORY_SIZE``) count only the form's
fields held in memory, not the files spooled: without this, anyone could make the login page
write any amount to disk.

Guarantees:

- A request that declares a body longer than ``MQ_MAX_REQUEST_BYTES`` is answered 413, and
  one with a ``Transfer-Encoding`` (a chunked body, whose length nobody declared) 411, from
  its headers alone: no byte of the body is read, whatever the method or path, whether the
  path exists or not, and whoever sends it.
- A submission's or a manifest check's POST (the upload doors) is judged instead by
  ``door.middleware.UploadGuardMiddleware``, which knows who sends it: a body within
  their own limit (``MQ_MAX_UPLOAD_BYTES``, the manifest's) is read only for a person who may
  submit, anything else refused unread as here.
- This middleware comes first in ``MIDDLEWARE``: nothing before it reads a body.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse, JsonResponse

from door.middleware import UploadGuardMiddleware


def body_problem(meta, limit: int) -> tuple[int, str] | None:
    """The status and reason that refuse a request's body by its headers, or None."""
    if meta.get("HTTP_TRANSFER_ENCODING", "").strip():
        return 411, (
            "a request body needs a Content-Length header; chunked bodies are not accepted"
        )
    raw = meta.get("CONTENT_LENGTH") or "0"
    try:
        length = int(raw)
    except ValueError:
        return 400, "the Content-Length header is not a number"
    if length < 0:
        return 400, "the Content-Length header is negative"
    if length > limit:
        return 413, (
            f"the request body is {length} bytes; this page takes at most {limit} bytes "
            "(MQ_MAX_REQUEST_BYTES)"
        )
    return None


class BodyLimitMiddleware:
    """First in settings.MIDDLEWARE."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        door = request.method == "POST" and UploadGuardMiddleware.door_of(request.path_info)
        if not door:
            problem = body_problem(request.META, settings.MQ_MAX_REQUEST_BYTES)
            if problem is not None:
                return refuse(request, *problem)
        return self.get_response(request)


def refuse(request, status: int, problem: str) -> HttpResponse:
    """The refusal, as JSON for the API, as plain text elsewhere."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"errors": [problem]}, status=status)
    return HttpResponse(
        f"{status}: {problem}\n", status=status, content_type="text/plain; charset=utf-8"
    )
