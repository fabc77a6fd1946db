"""When a maintenance window is on: its occurrences, in UTC, from its rule.

Plain Python (no Django), so the arithmetic is tested on its own. A one-off window is one
occurrence from ``start`` to ``end``. A weekly window starts each ``weekday`` at
``time_of_day`` on the wall clock of its named ``zone`` and lasts ``duration`` of real time:
across a change of daylight saving time it still starts at the same local time, and a
two-hour window is two hours long even on the night the clocks change. A local start time
that does not exist that night (skipped by the change) starts at the instant the same
reading would have had before the change, i.e. one hour later on the new clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

WEEK = timedelta(days=7)


@dataclass(frozen=True, order=True)
class Occurrence:
    start: datetime
    end: datetime

    def covers(self, moment: datetime) -> bool:
        return self.start <= moment < self.end

    def overlaps(self, other: Occurrence) -> bool:
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Rule:
    """A window's timing. One-off: ``start`` and ``end``. Weekly: ``weekday`` (Monday is 0),
    ``time_of_day`` and ``duration`` in ``zone``; ``start`` and ``end``, when given, bound
    the occurrences that may begin (from ``start``, before ``end``)."""

    start: datetime | None = None
    end: datetime | None = None
    weekly: bool = False
    weekday: int | None = None
    time_of_day: time | None = None
    duration: timedelta | None = None
    zone: str = "UTC"

    def occurrences(self, since: datetime, until: datetime) -> list[Occurrence]:
        """The occurrences that overlap ``[since, until)``, earliest first."""
        if not self.weekly:
            if self.start is None or self.end is None:
                return []
            one = Occurrence(self.start, self.end)
            return [one] if one.start < until and since < one.end else []
        assert self.weekday is not None and self.time_of_day is not None and self.duration
        zone = ZoneInfo(self.zone)
        # Local dates from one duration (and a day of zone offset) before ``since``.
        day = (since - self.duration - timedelta(days=1)).astimezone(zone).date()
        last = (until + timedelta(days=1)).astimezone(zone).date()
        day += timedelta(days=(self.weekday - day.weekday()) % 7)
        found = []
        while day <= last:
            start = datetime.combine(day, self.time_of_day, tzinfo=zone).astimezone(UTC)
            occurrence = Occurrence(start, start + self.duration)
            if self._begins_within(start) and occurrence.start < until and since < occurrence.end:
                found.append(occurrence)
            day += WEEK
        return found

    def _begins_within(self, start: datetime) -> bool:
        return (self.start is None or start >= self.start) and (
            self.end is None or start < self.end
        )

    def active(self, now: datetime) -> Occurrence | None:
        """The occurrence on at ``now`` (the latest to start, should two overlap)."""
        on = [o for o in self.occurrences(now, now + timedelta(microseconds=1)) if o.covers(now)]
        return on[-1] if on else None

    def next_after(self, now: datetime, horizon: timedelta = 2 * WEEK) -> Occurrence | None:
        """The first occurrence that starts after ``now`` (within ``horizon``)."""
        later = [o for o in self.occurrences(now, now + horizon) if o.start > now]
        return later[0] if later else None

    def ended_between(self, since: datetime, now: datetime) -> list[Occurrence]:
        """The occurrences that ended in ``(since, now]``: with nobody to apply them, missed."""
        return [o for o in self.occurrences(since, now) if since < o.end <= now]
