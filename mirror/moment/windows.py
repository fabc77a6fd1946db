"""The maintenance windows on at a moment, and those that began or ended between two.

Read from the windows' own rows, which are never deleted (a cancelled window keeps its row):
a window counts from its creation until it was cancelled, over its rule's occurrences. Whether
the scheduler applied an occurrence in time is in the audit (``window.start``,
``window.missed``), which ``holds`` reads for the hold itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from steering.models import MaintenanceWindow

from .scope import Scope

# Occurrences of one weekly window listed between two moments; a longer span says "more".
SHOWN = 100


@dataclass
class Change:
    window: MaintenanceWindow
    occurrence: Any  # steering.windows.timing.Occurrence, from the window's rule
    began: bool
    at: datetime


def _windows(until: datetime, since: datetime, scope: Scope):
    rows = MaintenanceWindow.objects.filter(created__lte=until).filter(
        Q(cancelled__isnull=True) | Q(cancelled__gt=since)
    )
    for w in rows.order_by("pk"):
        if w.scope == MaintenanceWindow.QUEUE or scope.admits(w.collection):
            yield w


def windows_at(at: datetime, scope: Scope) -> list[MaintenanceWindow]:
    """The windows whose occurrence covered ``at``, each with it as ``occurrence``."""
    on = []
    for w in _windows(at, at, scope):
        if (occurrence := w.rule().active(at)) is not None:
            w.occurrence = occurrence
            on.append(w)
    return on


def changes_between(a: datetime, b: datetime, scope: Scope) -> list[Change]:
    """Occurrences that began or ended in ``(a, b]``, while their window stood."""
    found = []
    for w in _windows(b, a, scope):
        stood_until = w.cancelled or b
        for o in w.rule().occurrences(a, b)[:SHOWN]:
            for began, moment in ((True, o.start), (False, o.end)):
                if a < moment <= b and w.created <= moment and moment <= stood_until:
                    found.append(Change(w, o, began, moment))
    return sorted(found, key=lambda c: (c.at, c.window.pk))
