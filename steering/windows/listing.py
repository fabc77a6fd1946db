"""Maintenance windows as pages show them: on now, upcoming or past, and what comes next."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import QuerySet
from django.utils import timezone

from steering.models import MaintenanceWindow
from steering.windows.timing import Occurrence

# Past windows listed on the page; the audit trail keeps every one.
PAST_SHOWN = 50
# How far ahead a one-off window may be planned and still be listed as upcoming.
HORIZON = timedelta(days=3660)


@dataclass(frozen=True)
class Shown:
    window: MaintenanceWindow
    state: str  # "active", "upcoming" or "past"
    occurrence: Occurrence | None  # the one on now, or the next one

    @property
    def timing(self) -> str:
        return timing(self.window)


def timing(w: MaintenanceWindow) -> str:
    """A weekly window's rule in words; a one-off window's times are shown as times."""
    if w.recurrence != MaintenanceWindow.WEEKLY:
        return "once"
    day = dict(MaintenanceWindow.WEEKDAYS).get(w.weekday, "?")  # type: ignore[arg-type]
    at = w.time_of_day.strftime("%H:%M") if w.time_of_day else "?"
    minutes = int(w.duration.total_seconds() // 60) if w.duration else 0
    length = f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"
    return f"every {day} at {at} {w.time_zone}, for {length}"


def shown(w: MaintenanceWindow, now: datetime) -> Shown:
    if w.cancelled is not None:
        return Shown(w, "past", None)
    rule = w.rule()
    if (on := rule.active(now)) is not None:
        return Shown(w, "active", on)
    if (later := rule.next_after(now, horizon=HORIZON)) is not None:
        return Shown(w, "upcoming", later)
    return Shown(w, "past", None)


def listed(now: datetime | None = None, rows: QuerySet | None = None) -> dict[str, list[Shown]]:
    """The windows by state: on now and upcoming (soonest first), and the latest past;
    of ``rows`` (those a person may read), by default all."""
    now = now or timezone.now()
    rows = MaintenanceWindow.objects.all() if rows is None else rows
    groups: dict[str, list[Shown]] = {"active": [], "upcoming": [], "past": []}
    for w in rows.order_by("-created", "-pk"):
        s = shown(w, now)
        if s.state == "past" and len(groups["past"]) >= PAST_SHOWN:
            continue
        groups[s.state].append(s)
    for state in ("active", "upcoming"):
        groups[state].sort(key=lambda s: s.occurrence.start if s.occurrence else now)
    return groups


def scheduled_next(now: datetime | None = None, rows: QuerySet | None = None) -> Shown | None:
    """What the dashboard shows: the window on now that ends first, else the next to start;
    of ``rows`` (those a person may read), by default all."""
    now = now or timezone.now()
    live = [shown(w, now) for w in _not_over(now, rows)]
    active = [s for s in live if s.state == "active" and s.occurrence]
    if active:
        return min(active, key=lambda s: s.occurrence.end)  # type: ignore[union-attr]
    upcoming = [s for s in live if s.state == "upcoming" and s.occurrence]
    return min(upcoming, key=lambda s: s.occurrence.start) if upcoming else None  # type: ignore[union-attr]


def active_for(scope: str, collection: str = "", now: datetime | None = None) -> list[Shown]:
    """The windows on now that hold the queue (``queue``) or a collection."""
    now = now or timezone.now()
    rows = _not_over(now).filter(scope=scope)
    if scope == MaintenanceWindow.COLLECTION:
        rows = rows.filter(collection=collection)
    return [s for w in rows if (s := shown(w, now)).state == "active"]


def _not_over(now: datetime, rows: QuerySet | None = None):
    rows = (MaintenanceWindow.objects.all() if rows is None else rows).filter(
        cancelled__isnull=True
    )
    return rows.exclude(recurrence=MaintenanceWindow.ONCE, end__lte=now)
