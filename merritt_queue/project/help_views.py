"""``/help/roles``: who may do what, on a page, so a person can see why a button is missing.

The table says in words what ``steering.permissions`` and ``door.rights`` decide; the
page adds the reader's own groups, read afresh, as every right is.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from door import rights
from steering.models import group_names
from steering.permissions import role_of
from ui.reading_scope import has_role


@login_required
def roles(request: HttpRequest) -> HttpResponse:
    user = request.user
    context = {
        "groups": sorted(group_names(user)),
        "steers_as": role_of(user).group,
        "superuser": user.is_superuser,
        "may_submit": rights.submit_refusal(user, None) is None,
        "no_role": not has_role(user),
    }
    return render(request, "help/roles.html", context)
