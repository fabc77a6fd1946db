"""An account signed in with no role yet sees one page saying so, and whom to ask, instead
of empty lists that look like an empty queue (``ui.reading_scope.has_role``).

The Roles page, signing out, the Django admin (which asks for its own rights) and the API
(whose answers are narrowed by ``ui.reading_scope``, to nothing) stay as they are.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.shortcuts import render

from steering.models import ADMINISTRATOR
from ui.reading_scope import has_role

OPEN = ("/accounts/", "/help/", "/admin/", "/api/", "/static/", "/healthz", "/metrics")


def administrators() -> list:
    """Whom to ask for a role: the active people who may give one."""
    people = get_user_model().objects.filter(is_active=True)
    people = people.filter(Q(is_superuser=True) | Q(groups__name=ADMINISTRATOR)).distinct()
    return list(people.order_by("username"))


class NoRoleMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if (
            user is not None
            and user.is_authenticated
            and not request.path.startswith(OPEN)
            and not has_role(user)
        ):
            context = {"administrators": administrators()}
            return render(request, "ui/no_role.html", context, status=403)
        return self.get_response(request)
