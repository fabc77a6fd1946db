"""Capacity ahead, read from the mirror and the working disk: the last hour's rates, the
backlog they give, when the disk crosses ``MQ_DISK_THRESHOLD``, and what releasing a held
collection adds (the arithmetic is ``merritt_queue.core.forecast``).

The dashboard, a collection release's confirmation page and ``/metrics`` all ask this
module, so they say the same. It lives in ``ui`` because all three read it: the steering
pages may not import the dashboard's modules.

Queries, whatever the number of jobs, each result kept ``AHEAD_CACHE_SECONDS``:

- the last hour: one GROUP BY over the timeline's status-and-time index, joined on the
  jobs' unique jid for their sizes;
- the held collections: one aggregate of their Held jobs and one of their Held batches
  (the status index), and one for the typical size of each, read from its latest finished
  jobs (``TYPICAL_OF`` each, the collection index), only when some held job has no size.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Q, Sum
from django.utils import timezone

from batches.models import Batch
from jobs.models import Job, JobEvent
from merritt_queue.core.forecast import DiskForecast, ReleasePreview, backlog_seconds
from merritt_queue.core.states import JOB_STEPS, BatchStatus, JobStatus
from merritt_queue.deposit.diskspace import used_and_total

J = JobStatus
AHEAD_CACHE_SECONDS = 30
# The jobs ahead: waiting to start or in a step. Held and Failed jobs wait for a person.
BACKLOG = (J.PENDING, *JOB_STEPS)
# A collection's typical job size is read from this many of its latest Completed jobs.
TYPICAL_OF = 200
# The most held collections previewed at once (the rest are counted without a preview).
PREVIEWED = 50


@dataclass(frozen=True)
class LastHour:
    finished: int  # jobs that reached Completed or Failed
    bytes_in: int  # sizes of the jobs that entered Downloading
    bytes_out: int  # sizes of the jobs that reached Completed: Notify removed their folder


def read_last_hour(now: datetime) -> LastHour:
    """One query (see the module's docstring). A row whose job cleanup purged counts as a
    job, with no size."""
    events = connection.ops.quote_name(JobEvent._meta.db_table)
    jobs = connection.ops.quote_name(Job._meta.db_table)
    sql = f"""
        SELECT e.to_status, COUNT(*), COALESCE(SUM(j.space_needed), 0) FROM {events} e
        LEFT JOIN {jobs} j ON j.jid = e.jid
        WHERE e.to_status IN (%s, %s, %s) AND e.at >= %s AND e.at < %s
          AND e.from_status <> e.to_status
        GROUP BY e.to_status
    """
    since = now - timedelta(hours=1)
    params: list[str | datetime] = [J.DOWNLOADING.value, J.COMPLETED.value, J.FAILED.value]
    params += [since, now]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = {status: (int(n), int(b)) for status, n, b in cursor.fetchall()}
    done, failed = rows.get(J.COMPLETED, (0, 0)), rows.get(J.FAILED, (0, 0))
    return LastHour(done[0] + failed[0], rows.get(J.DOWNLOADING, (0, 0))[1], done[1])


def last_hour(now: datetime | None = None) -> LastHour:
    """``read_last_hour`` of now, kept ``AHEAD_CACHE_SECONDS``."""
    found = cache.get("ui:ahead:last-hour")
    if found is None:
        found = read_last_hour(now or timezone.now())
        cache.set("ui:ahead:last-hour", found, AHEAD_CACHE_SECONDS)
    return found


def work_disk() -> tuple[int, int] | None:
    """The working disk's unusable bytes and size (the folder, or the nearest one above it
    that exists yet); None when it cannot be read."""
    path = Path(settings.MQ_WORK_DIR)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return used_and_total(path)
    except OSError:
        return None


@dataclass(frozen=True)
class Ahead:
    backlog: int  # jobs Pending or in a step
    hour: LastHour
    disk: DiskForecast | None

    @property
    def backlog_seconds(self) -> float | None:
        return backlog_seconds(self.backlog, self.hour.finished)


def ahead(job_counts: dict[str, int], disk: tuple[int, int] | None = None) -> Ahead:
    """The work ahead, from the mirror's jobs by status (which the caller has counted
    already) and the working disk (read now unless given)."""
    hour = last_hour()
    disk = disk if disk is not None else work_disk()
    forecast = None
    if disk is not None:
        used, total = disk
        forecast = DiskForecast(
            used, total, settings.MQ_DISK_THRESHOLD, hour.bytes_in, hour.bytes_out
        )
    return Ahead(sum(job_counts.get(s, 0) for s in BACKLOG), hour, forecast)


# --- releasing a held collection ------------------------------------------------------------


def caught_by_a_hold() -> Q:
    """Items a collection hold caught: the message ``store.holds.held_by_a_hold`` knows
    them by, in SQL (what ``collection.release`` releases with the hold)."""
    return (Q(message__startswith="collection ") | Q(message__startswith="profile ")) & Q(
        message__contains=" is on hold"
    )


def _typical_sizes(names: list[str]) -> dict[str, int]:
    """Each collection's mean size over its latest ``TYPICAL_OF`` Completed jobs: one query,
    each part read backwards on the collection's index."""
    if not names:
        return {}
    table = connection.ops.quote_name(Job._meta.db_table)
    part = (
        "SELECT %s AS c, AVG(s) AS a FROM (SELECT space_needed AS s FROM {t} "
        "WHERE collection = %s AND status = %s ORDER BY jid DESC LIMIT {n}) x{i}"
    )
    sql = " UNION ALL ".join(part.format(t=table, n=TYPICAL_OF, i=i) for i in range(len(names)))
    params: list = []
    for name in names:
        params += [name, name, J.COMPLETED.value]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {c: int(a or 0) for c, a in cursor.fetchall()}


def release_previews(names: list[str], *, by_hold_only: bool) -> dict[str, ReleasePreview]:
    """What releasing each held collection of ``names`` adds: its Held jobs (with
    ``by_hold_only``, those its hold caught: what ``collection.release`` releases), their
    bytes, and the time at the last hour's rate. Its Held batches are counted: their jobs
    are not known until the batch is read."""
    names = sorted(set(names))[:PREVIEWED]
    if not names:
        return {}
    jobs = Job.objects.filter(status=J.HELD, collection__in=names, removed_at__isnull=True)
    batches = Batch.objects.filter(
        status=BatchStatus.HELD, collection__in=names, removed_at__isnull=True
    ).filter(approval__isnull=True)  # awaiting approval: no release starts it
    if by_hold_only:
        jobs, batches = jobs.filter(caught_by_a_hold()), batches.filter(caught_by_a_hold())
    held = {
        c: (n, known or 0, unsized)
        for c, n, known, unsized in jobs.order_by()
        .values_list("collection")
        .annotate(n=Count("id"), known=Sum("space_needed"), unsized=Count("id", Q(space_needed=0)))
    }
    held_batches = dict(
        batches.order_by()
        .values_list("collection")
        .annotate(n=Count("id"))
        .values_list("collection", "n")
    )
    typical = _typical_sizes([c for c in names if held.get(c, (0, 0, 0))[2]])
    rate = last_hour().finished
    out = {}
    for c in names:
        n, known, unsized = held.get(c, (0, 0, 0))
        out[c] = ReleasePreview(
            c, n, held_batches.get(c, 0), known, unsized, typical.get(c, 0), rate
        )
    return out
