"""Bearer-token authentication of every API view: one reading of the header, one refusal.

A token's ``last_used`` is noted at most once a minute: clients poll the status API, and a
database write per poll would buy nothing a librarian reads.
"""

from __future__ import annotations

import functools
from datetime import timedelta

from django.conf import settings
from django.http import JsonResponse
from django.utils import timezone

from batches.models import ApiToken

NO_TOKEN = "a valid API token is required (Authorization: Bearer <token>)"
USE_NOTED_EVERY = timedelta(minutes=1)


def token_of(request) -> ApiToken | None:
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() not in ("bearer", "token") or not key.strip():
        return None
    return ApiToken.lookup(key.strip())


def note_use(token: ApiToken) -> None:
    """The token's last use, unless noted within the minute or the site is read-only."""
    if settings.READ_ONLY:
        return
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk).exclude(last_used__gt=now - USE_NOTED_EVERY).update(
        last_used=now
    )


def with_token_user(view):
    """``view(request, user, ...)`` for the user of the request's valid token; the 401
    otherwise, which every API view answers alike."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        token = token_of(request)
        if token is None:
            return JsonResponse({"errors": [NO_TOKEN]}, status=401)
        note_use(token)
        return view(request, token.user, *args, **kwargs)

    return wrapped
