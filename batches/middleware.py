"""Refuse a submission's body before anything reads it.

Django's CSRF check reads a form's whole body (to /tmp, for an upload) before the view runs;
so a POST to an upload URL is judged here first, on its headers alone: read-only mode, who
sends it (session or API token) and whether they may submit, then its Content-Length. A body
without a Content-Length (chunked) is refused too: Django would read none of it, and the
submission would arrive empty.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse
from django.shortcuts import render
from django.urls import reverse

from batches import rights
from batches.submission import READ_ONLY_PROBLEM, request_size_problem


def _refuse(request, api: bool, status: int, problem: str):
    if api:
        return JsonResponse({"errors": [problem]}, status=status)
    from batches.forms import SubmitForm  # the form's queryset needs the apps loaded

    context = {"form": SubmitForm(), "refused": problem, "read_only": status == 503}
    return render(request, "batches/submit.html", context, status=status)


def length_problem(request, api: bool) -> tuple[int, str] | None:
    """The status and reason that refuse this body by its headers alone, or None."""
    if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        return 411, "a submission needs a Content-Length header; chunked bodies are not accepted"
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 400, "the Content-Length header is not a number"
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
            api = request.path_info == reverse("batches:api-submit")
            if api or request.path_info == reverse("batches:submit"):
                refused = self.judge(request, api)
                if refused is not None:
                    return refused
        return self.get_response(request)

    def judge(self, request, api: bool):
        if settings.READ_ONLY:
            return _refuse(request, api, 503, READ_ONLY_PROBLEM)
        if api:
            from batches.api import token_of

            token = token_of(request)
            if token is None:
                return _refuse(
                    request,
                    api,
                    401,
                    "a valid API token is required (Authorization: Bearer <token>)",
                )
            user = token.user
        else:
            user = request.user
            if not user.is_authenticated:
                return redirect_to_login(request.get_full_path())
        if refusal := rights.submit_refusal(user, None):
            return _refuse(request, api, 403, refusal)
        if problem := length_problem(request, api):
            return _refuse(request, api, *problem)
        return None
