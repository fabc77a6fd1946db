"""``may_submit``: whether the navigation offers the submit page.

Judged on the request's user and the groups the page reads anyway (``group_names``), so it
costs no query of its own; the submit page and the API check the rights afresh.
"""

from __future__ import annotations

from django.utils.functional import SimpleLazyObject

from door import rights
from steering.models import group_names


def may_submit(request) -> dict:
    user = getattr(request, "user", None)

    def decide() -> bool:
        if user is None or not user.is_authenticated or not user.is_active:
            return False
        return user.is_superuser or bool(group_names(user) & set(rights.SUBMIT_GROUPS))

    return {"may_submit": SimpleLazyObject(decide)}
