"""``may_maintain``, ``may_operate``: whether the navigation offers the Maintenance page
(administrators) and the Workers page (operators and administrators); the pages and their
actions check the role afresh."""

from __future__ import annotations

from django.conf import settings
from django.utils.functional import SimpleLazyObject

from steering.permissions import Role, role_of


def may_maintain(request) -> dict:
    user = getattr(request, "user", None)
    return {
        "may_maintain": SimpleLazyObject(
            lambda: user is not None and role_of(user) >= Role.ADMINISTRATOR
        ),
        # Two-person deletion is on (``steering.twoperson``): the nav links its requests.
        "two_person": bool(settings.MQ_TWO_PERSON_DELETION),
        "may_operate": SimpleLazyObject(
            lambda: user is not None and role_of(user) >= Role.OPERATOR
        ),
    }
