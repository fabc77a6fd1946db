"""A confirmation page's signed payload: what the person was shown, signed so that the POST
acting on it cannot be altered, good for the person it was shown to, and stale after
``MAX_AGE`` (the page must then be shown again, with what is true by then)."""

from __future__ import annotations

from django.core import signing
from django.http import HttpResponseBadRequest

MAX_AGE = 6 * 3600


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
