"""A confirmation page's signed payload: what the person was shown, signed so that the POST
acting on it cannot be altered, good for the person it was shown to, and stale after
``MAX_AGE`` (the page must then be shown again, with what is true by then). Its token
starts the action once. And the page that refuses an action to a person."""

from __future__ import annotations

import uuid

from django.core import signing
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import render

MAX_AGE = 6 * 3600


def sign(request, salt: str, *, compress: bool = False, **shown) -> str:
    """The payload of a confirmation page showing ``shown`` to this person, with a new token."""
    data = {**shown, "user": request.user.pk, "token": uuid.uuid4().hex}
    return signing.dumps(data, salt=salt, compress=compress)


def read(request, salt: str, what: str = "", **shown) -> dict | HttpResponseBadRequest:
    """The payload the confirmation page signed, or why the POST cannot act on it; ``shown``:
    what the payload must name besides the person (its action, its delivery: ``what``)."""
    try:
        data = signing.loads(request.POST.get("payload", ""), salt=salt, max_age=MAX_AGE)
    except signing.SignatureExpired:
        return HttpResponseBadRequest("This confirmation page is too old: show it again.")
    except signing.BadSignature:
        return HttpResponseBadRequest("The confirmation was altered or is not valid.")
    if data.get("user") != request.user.pk or any(data.get(k) != v for k, v in shown.items()):
        other = f"{what} or person" if what else "person"
        return HttpResponseBadRequest(f"This confirmation was made for another {other}.")
    return data


def refused(request, action, why: str) -> HttpResponse:
    """Why ``action`` (anything with a ``label``) is not for this person, or not now."""
    return render(request, "steering/refused.html", {"action": action, "why": why}, status=403)
