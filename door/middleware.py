"""Refuse a submission's body, or a manifest sent to be checked, before anything reads it.

Django's CSRF check reads a form's whole body (to /tmp, for an upload) before the view runs;
so a POST to an upload URL is judged here first, on its headers alone: read-only mode (for a
submission: checking a manifest writes nothing), who sends it (session or API token) and
whether they may submit, then its Content-Length (a manifest's own limit for a check). A body
without a Content-Length (chunked) is refused too: Django would read none of it, and the
submission would arrive empty.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.shortcuts import render
from django.urls import reverse

from door import rights
from door.submission import READ_ONLY_PROBLEM, request_size_problem
from door.tokens import NO_TOKEN, token_of

# Room for a form's boundaries and other fields around a manifest sent to be checked.
FORM_ROOM = 64 * 1024


def _refuse(request, api: bool, status: int, problem: str, check: bool = False):
    if api:
        return JsonResponse({"errors": [problem]}, status=status)
    if check:
        return render(request, "batches/manifest_check.html", {"refused": problem}, status=status)
    from batches.forms import SubmitForm  # the form's queryset needs the apps loaded

    context = {"form": SubmitForm(), "refused": problem, "read_only": status == 503}
    return render(request, "batches/submit.html", context, status=status)


def length_problem(request, api: bool, limit: int | None = None) -> tuple[int, str] | None:
    """The status and reason that refuse this body by its headers alone, or None.

    ``limit``: the most bytes the body may hold; by default a submission's own limits.
    """
    if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        return 411, "a request body needs a Content-Length header; chunked bodies are not accepted"
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 400, "the Content-Length header is not a number"
    if limit is not None:
        if length > limit:
            return 413, f"the body is {length} bytes, over the limit of {limit} bytes"
        return None
    if api and request.content_type == "application/json":
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and length > limit:
            return 413, f"the JSON body is {length} bytes, over the limit of {limit} bytes"
        return None
    problem = request_size_problem(length)
    return (413, problem) if problem else None


class UploadGuardMiddleware:
    """Between AuthenticationMiddleware and CsrfViewMiddleware (see settings.MIDDLEWARE)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method == "POST":
            door = self.door_of(request.path_info)
            if door is not None:
                refused = self.judge(request, *door)
                if refused is not None:
                    return refused
        return self.get_response(request)

    @staticmethod
    def door_of(path: str) -> tuple[bool, bool] | None:
        """(api, check) for a guarded URL, None for any other."""
        doors = {
            reverse("batches:api-submit"): (True, False),
            reverse("batches:submit"): (False, False),
            reverse("batches:api-check-manifest"): (True, True),
            reverse("batches:check-manifest"): (False, True),
        }
        return doors.get(path)

    def judge(self, request, api: bool, check: bool = False):
        if settings.READ_ONLY and not check:
            return _refuse(request, api, 503, READ_ONLY_PROBLEM)
        if api:
            token = token_of(request)
            if token is None:
                return _refuse(request, api, 401, NO_TOKEN)
            user = token.user
        else:
            user = request.user
            if not user.is_authenticated:
                return redirect_to_login(request.get_full_path())
        if refusal := rights.submit_refusal(user, None):
            return _refuse(request, api, 403, refusal, check)
        limit = settings.MQ_MAX_MANIFEST_BYTES + FORM_ROOM if check else None
        if problem := length_problem(request, api, limit):
            return _refuse(request, api, *problem, check)
        if check and not api and (problem := pasted_problem(request)):
            return _refuse(request, api, *problem, check)
        return None


def pasted_problem(request) -> tuple[int, str] | None:
    """A manifest pasted into the check page is a form field, which Django holds in memory
    under DATA_UPLOAD_MAX_MEMORY_SIZE, not the manifest's limit (a chosen file is not held
    so). Past it, the form's reading raises, here or in the CSRF check alike: read here
    (the body's length is judged already), so the page offers a way out, not a bare 400."""
    try:
        request.POST  # noqa: B018 - read for its error; the view reads it again from memory
    except RequestDataTooBig:
        cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return 413, (
            f"pasted text is limited to {cap} bytes; choose the manifest as a file instead"
        )
    return None
