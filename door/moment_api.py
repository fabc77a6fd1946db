"""``GET /api/v1/moment?at=`` (the queue at a moment), ``?at=&to=`` (what changed between
two) and ``?at=&kind=job|batch&state=&page=`` (the items in a state then), as JSON, for a
bearer token (mirror.moment). Within the token's user's reading scope, as the pages are;
a moment the record cannot show answers 400 with the reason."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_safe

from door.tokens import with_token_user
from mirror.moment import report, states, when
from mirror.moment.scope import of_user


def _refused(why: str) -> JsonResponse:
    return JsonResponse({"errors": [why]}, status=400)


@require_safe
@with_token_user
def moment(request, user):
    given, to = request.GET.get("at", ""), request.GET.get("to", "")
    if not given:
        return _refused("at is required: a time in ISO 8601, e.g. ?at=2026-03-10T12:00:00Z")
    kind, state = request.GET.get("kind", ""), request.GET.get("state", "")
    if state and kind not in states.KINDS:
        return _refused(f"kind must be one of {', '.join(states.KINDS)} to list a state's items")
    page = request.GET.get("page", "1")
    if not page.isdigit() or not 0 < int(page) < 10**6:
        return _refused("page must be a whole number from 1")
    try:
        at = when.parse(given)
        b = when.parse(to) if to else None
        when.check(at) if b is None else when.check_pair(at, b)
    except when.Refused as e:
        return _refused(str(e))
    scope = of_user(user)
    if b is not None:
        return JsonResponse(report.between(at, b, scope, int(page)))
    if state:
        return JsonResponse(report.items(at, kind, state, scope, int(page)))
    return JsonResponse(report.moment(at, scope))
