"""The dashboard's Throughput panel: jobs completed and failed per hour and per day, and the
median time from submission to Completed, from the mirror's timeline rows (``JobEvent``).

Two queries whatever the number of jobs, their results cached for
``THROUGHPUT_CACHE_SECONDS``:

- one GROUP BY (status, UTC hour) of the Completed and Failed rows of the last seven days,
  which gives both charts: the last 24 hours, and the last 7 days of the display zone
  (summed here from the hours);
- one for both medians (the last 24 hours, the last 7 days): each job completed in the
  window, joined on its batch (the unique bid index of a table far smaller than the
  timeline) for the time the depositor submitted it, ordered by the time between, and read
  at the middle in SQL. A job whose batch the mirror no longer holds, or holds with no
  submission time, is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.core.cache import cache
from django.db import connection
from django.db.models import Count
from django.db.models.functions import Substr, TruncHour
from django.utils import timezone

from batches.models import Batch
from jobs.models import JobEvent
from merritt_queue.core.states import JobStatus
from ui.cells import age_text

# The aggregates take tens of milliseconds at 100,000 jobs on SQLite, and the dashboard
# refreshes itself: their results are kept in Django's cache for a few seconds.
THROUGHPUT_CACHE_SECONDS = 30
CHART_W, CHART_H, CHART_PAD = 480, 110, 18
FINISHED = (JobStatus.COMPLETED, JobStatus.FAILED)


@dataclass
class Bar:
    start: datetime
    count: int  # completed
    failed: int = 0
    label: str = ""
    x: float = 0
    y: float = 0  # the completed part, at the bottom
    h: float = 0
    fy: float = 0  # the failed part, stacked on it
    fh: float = 0

    @property
    def total(self) -> int:
        return self.count + self.failed


@dataclass
class Chart:
    bars: list[Bar]
    unit: str  # "hour" or "day"
    width: int = CHART_W
    height: int = CHART_H
    bar_width: float = 0
    labels: list[tuple[float, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(b.count for b in self.bars)

    @property
    def failed(self) -> int:
        return sum(b.failed for b in self.bars)

    @property
    def peak(self) -> int:
        return max((b.total for b in self.bars), default=0)

    @property
    def axis_y(self) -> int:
        return self.height - CHART_PAD

    @property
    def label_y(self) -> int:
        return self.height - 4


@dataclass
class Median:
    seconds: float | None
    jobs: int

    @property
    def text(self) -> str:
        # Rounded: SQLite's julianday differences are a hair off whole seconds.
        return "—" if self.seconds is None else age_text(timedelta(seconds=round(self.seconds)))


@dataclass
class Throughput:
    day: Chart
    week: Chart
    median_day: Median
    median_week: Median


def _per_hour(start: datetime, end: datetime) -> dict[tuple[str, datetime], int]:
    """Completed and Failed rows per (status, UTC hour) in [start, end): one GROUP BY."""
    if connection.vendor == "sqlite":
        # Stored as UTC text: the hour is its first 13 characters. (TruncHour would call
        # Python once per row on SQLite, 2-3 times slower.)
        hour: Substr | TruncHour = Substr("at", 1, 13)
    else:
        hour = TruncHour("at", tzinfo=UTC)
    rows = (
        JobEvent.objects.filter(to_status__in=FINISHED, at__gte=start, at__lt=end)
        .order_by()
        .annotate(hour=hour)
        .values_list("to_status", "hour")
        .annotate(n=Count("id"))
    )
    out = {}
    for status, key, n in rows:
        if isinstance(key, str):
            key = datetime.strptime(key, "%Y-%m-%d %H").replace(tzinfo=UTC)
        out[(status, key.astimezone(UTC))] = n
    return out


def _seconds_between(later: str, earlier: str) -> str:
    if connection.vendor == "sqlite":
        return f"(julianday({later}) - julianday({earlier})) * 86400.0"
    return f"EXTRACT(EPOCH FROM ({later} - {earlier}))"


def medians_to_completed(day: datetime, week: datetime, end: datetime) -> tuple[Median, Median]:
    """The median time from submission to Completed of the jobs completed in [day, end) and
    in [week, end) (``week`` <= ``day``): one query, reading the middle of each in SQL."""
    table = connection.ops.quote_name(JobEvent._meta.db_table)
    batches = connection.ops.quote_name(Batch._meta.db_table)
    seconds = _seconds_between("c.at", "b.submitted")
    middle = "LIMIT 2 OFFSET (SELECT CASE WHEN {k} > 0 THEN ({k} - 1) / 2 ELSE 0 END FROM n)"
    sql = f"""
        WITH w AS (
            SELECT c.at AS at, {seconds} AS v FROM {table} c
            JOIN {batches} b ON b.bid = c.bid
            WHERE c.to_status = %s AND c.at >= %s AND c.at < %s AND b.submitted IS NOT NULL
        ), d AS (SELECT v FROM w WHERE at >= %s),
        n AS (SELECT (SELECT COUNT(*) FROM d) AS kd, (SELECT COUNT(*) FROM w) AS kw)
        SELECT 0, kd, v FROM (SELECT v FROM d ORDER BY v {middle.format(k="kd")}) dm, n
        UNION ALL
        SELECT 1, kw, v FROM (SELECT v FROM w ORDER BY v {middle.format(k="kw")}) wm, n
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [JobStatus.COMPLETED.value, week, end, day])
        rows = cursor.fetchall()
    values: dict[int, list[float]] = {0: [], 1: []}
    counts = {0: 0, 1: 0}
    for which, k, v in rows:
        counts[which] = int(k)
        values[which].append(float(v))

    def median(which: int) -> Median:
        k, found = counts[which], values[which][: 1 if counts[which] % 2 else 2]
        return Median(max(0.0, sum(found) / len(found)), k) if found else Median(None, 0)

    return median(0), median(1)


def _lay_out(chart: Chart) -> Chart:
    slot = chart.width / len(chart.bars)
    plot_h = chart.height - CHART_PAD
    peak = chart.peak
    for i, bar in enumerate(chart.bars):
        bar.x = round(i * slot + 1, 1)
        bar.h = round(plot_h * bar.count / peak, 1) if peak else 0
        bar.fh = round(plot_h * bar.failed / peak, 1) if peak else 0
        bar.y = round(plot_h - bar.h, 1)
        bar.fy = round(bar.y - bar.fh, 1)
    chart.bar_width = round(slot - 2, 1)
    every = 6 if chart.unit == "hour" else 1
    chart.labels = [(b.x, b.label) for b in chart.bars][::every]
    return chart


def throughput(now: datetime | None = None) -> Throughput:
    """The panel's two charts and two medians (see the module's docstring)."""
    now = timezone.localtime(now or timezone.now())
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    hours = [end - timedelta(hours=24 - i) for i in range(24)]
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    days = [today - timedelta(days=6 - i) for i in range(7)]
    start = min(days[0], hours[0])
    key = f"dashboard:throughput:{end.isoformat()}:{today.isoformat()}"
    found = cache.get(key)
    if found is None:
        found = (
            _per_hour(start, end),
            *medians_to_completed(end - timedelta(hours=24), end - timedelta(days=7), end),
        )
        cache.set(key, found, THROUGHPUT_CACHE_SECONDS)
    counts, median_day, median_week = found

    def hour_bar(s: datetime) -> Bar:
        utc = s.astimezone(UTC)
        done = counts.get((JobStatus.COMPLETED, utc), 0)
        return Bar(s, done, counts.get((JobStatus.FAILED, utc), 0), s.strftime("%H:%M"))

    day_bars = [Bar(d, 0, 0, d.strftime("%a %d")) for d in days]
    by_date = {b.start.date(): b for b in day_bars}
    for (status, hour), n in counts.items():
        bar = by_date.get(timezone.localtime(hour).date())
        if bar is None:
            continue
        if status == JobStatus.COMPLETED:
            bar.count += n
        else:
            bar.failed += n
    return Throughput(
        _lay_out(Chart([hour_bar(s) for s in hours], "hour")),
        _lay_out(Chart(day_bars, "day")),
        median_day,
        median_week,
    )
