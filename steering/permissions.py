"""Who may take an admin action: the person's role, ordered, and the collections they may
act on. Enforced when an action runs (``steering.actions.execution``), not only by hiding
buttons."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

from steering.models import group_names
from steering.roles import BY_GROUP, Role

if TYPE_CHECKING:
    from steering.actions.kinds import Action


def role_of(user) -> Role:
    if not user.is_authenticated:
        return Role.NONE
    if user.is_superuser:
        return Role.ADMINISTRATOR
    return max((BY_GROUP[n] for n in group_names(user) if n in BY_GROUP), default=Role.NONE)


def may(user, action: Action) -> bool:
    return not settings.READ_ONLY and role_of(user) >= action.role


def collections_of(user) -> set[str] | None:
    """The collections a person may act on; None means all."""
    scope = getattr(user, "scope", None) if user.is_authenticated else None
    return set(scope.collections) if scope and scope.collections else None


def refusal(user, action: Action) -> str | None:
    if settings.READ_ONLY:
        return (
            "the queue is read-only at the moment (set by the site's administrators): "
            "no action can be taken"
        )
    if not may(user, action):
        return f"{action.label} needs the {action.role} role"
    return None
