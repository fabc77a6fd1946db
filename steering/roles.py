"""The steering ranks and the Django groups that grant them. Apart from ``permissions`` (who
may take an action), so that the catalog names each action's least role without importing
the permissions that judge by the catalog's actions."""

from __future__ import annotations

from enum import IntEnum

from steering.models import ADMINISTRATOR, OPERATOR


class Role(IntEnum):
    """The steering ranks, ordered: each may do what the ranks below it may. Shown as the
    Django group that grants it, as the messages name it."""

    NONE = 0
    OPERATOR = 1
    ADMINISTRATOR = 2

    @property
    def group(self) -> str:
        return GROUPS.get(self, "")

    def __str__(self) -> str:
        return self.group

    def __format__(self, spec: str) -> str:
        return format(self.group, spec)


GROUPS = {Role.OPERATOR: OPERATOR, Role.ADMINISTRATOR: ADMINISTRATOR}
BY_GROUP = {group: role for role, group in GROUPS.items()}
