"""What holds items back queue-wide, and the pace of the last hour, read from the mirror.

A handful of queries per page whatever the number of rows (``queue_facts``), and three for
the pace (``measured_rate``). Pages, the status API and
/metrics all read through here and decide with ``merritt_queue.core.waiting``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max, Min
from django.utils import timezone

from batches.models import Collection
from jobs.models import JobEvent, MirrorState
from merritt_queue.core import waiting as w
from merritt_queue.core.states import JOB_STEPS, JobStatus
from merritt_queue.core.waitestimate import Rate
from steering.models import AdminAction, MaintenanceWindow

RATE_WINDOW = timedelta(hours=1)
# The latest completions the time-to-finish is averaged over.
RATE_SAMPLE = 500
# The timeline records whole seconds.
RESOLUTION = 1.0
FINISHED = (JobStatus.COMPLETED, JobStatus.FAILED)
# The admin actions that pause and resume the queue (steering.actions.catalog).
PAUSE_ACTION, RESUME_ACTION = "queue.pause", "queue.resume"
# The state a job enters when it leaves each working state.
NEXT_STATE = dict(
    zip((JobStatus.PENDING, *JOB_STEPS), (*JOB_STEPS, JobStatus.COMPLETED), strict=True)
)


def open_breakers() -> Sequence[w.Breaker]:
    """The dependencies known to be down (``waiting.DEPENDENCY_DOWN``): none until the
    project's circuit breakers exist; each then becomes a ``Breaker`` (its name, since when,
    its next probe, the job states whose steps need it), and every page, the status API and
    /metrics say so at once."""
    return ()


def queue_facts(
    now: datetime | None = None, breakers: Sequence[w.Breaker] | None = None
) -> w.QueueFacts:
    """The pause, the holds, the storage locks, the open breakers and the working disk, as
    last mirrored."""
    now = now or timezone.now()
    breakers = open_breakers() if breakers is None else breakers
    windows = list(
        MaintenanceWindow.objects.filter(
            cancelled__isnull=True, applied_start__isnull=False, applied_end__gt=now
        ).values_list("pk", "scope", "collection", "applied_end", "reason")
    )
    locks = MirrorState.objects.filter(name="locks").values_list("detail", flat=True).first()
    locks = locks or {}
    pause = None
    if locks.get("paused"):
        pause = _pause(locks, [x for x in windows if x[1] == MaintenanceWindow.QUEUE])
    storage = {
        str(e.get("name")): str(e.get("data") or "")
        for e in locks.get("locks") or []
        if e.get("kind") == "storage"
    }
    held_by_window = {x[2]: x for x in windows if x[1] == MaintenanceWindow.COLLECTION}
    holds = {}
    for c in Collection.objects.filter(held=True).only(
        "mnemonic", "held_by", "held_reason", "held_at"
    ):
        win = held_by_window.get(c.mnemonic)
        holds[c.mnemonic] = w.Hold(
            c.held_by,
            win[4] if win else c.held_reason,
            c.held_at,
            win[0] if win else None,
            win[3] if win else None,
        )
    return w.QueueFacts(pause, holds, storage, tuple(breakers), working_disk())


def _pause(locks: dict, windows: list) -> w.Pause:
    since = _parse(locks.get("paused_at"))
    if windows:
        pk, _, _, ends, reason = min(windows, key=lambda x: x[3])
        return w.Pause(since, "", pk, ends, reason)
    # The last pause or resume taken here: a resume after it means someone else paused
    # (Merritt's admin, or a tool writing the node), who is then not named.
    action = (
        AdminAction.objects.filter(action__in=(PAUSE_ACTION, RESUME_ACTION))
        .order_by("-started", "-pk")
        .values_list("action", "username", "reason")
        .first()
    )
    if action is None or action[0] != PAUSE_ACTION:
        return w.Pause(since)
    return w.Pause(since, action[1], None, None, action[2])


def _parse(text) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def working_disk() -> w.Disk | None:
    """The working disk as this process sees it; None where it has none (a web host that
    does not share the workers' disk shows no figure rather than its own)."""
    try:
        usage = shutil.disk_usage(settings.MQ_WORK_DIR)
    except OSError:
        return None
    return w.Disk(usage.total, usage.used, settings.MQ_DISK_THRESHOLD)


def measured_rate(now: datetime | None = None) -> Rate:
    """Jobs finished per second over the last hour while the queue was busy (from the first
    to the last finish of the hour), and how long jobs took from leaving each state to
    Completed. Three queries on the timeline's indexes, at most ``RATE_SAMPLE`` jobs."""
    now = now or timezone.now()
    finished = JobEvent.objects.filter(to_status__in=FINISHED, at__gt=now - RATE_WINDOW)
    agg = finished.aggregate(n=Count("id"), first=Min("at"), last=Max("at"))
    n, first, last = agg["n"], agg["first"], agg["last"]
    busy = (last - first).total_seconds() if n and n > 1 else 0.0
    # Times are whole seconds: finishes within one second were at least that fast.
    per_second = (n - 1) / max(busy, RESOLUTION) if n and n > 1 else None
    done = dict(
        finished.filter(to_status=JobStatus.COMPLETED)
        .order_by("-at")
        .values_list("jid", "at")[:RATE_SAMPLE]
    )
    entered: dict[tuple[str, str], datetime] = {}
    rows = JobEvent.objects.filter(jid__in=list(done), to_status__in=list(NEXT_STATE.values()))
    for jid, status, at in rows.order_by("at").values_list("jid", "to_status", "at"):
        if at <= done[jid]:
            entered[jid, status] = at  # the last entry before it completed
    after: dict[str, float] = {}
    for state, nxt in NEXT_STATE.items():
        spans = [(done[j] - at).total_seconds() for (j, s), at in entered.items() if s == nxt]
        if spans:
            after[state] = sum(spans) / len(spans)
    return Rate(per_second, after)
