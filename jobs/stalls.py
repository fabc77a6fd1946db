"""Stalled jobs: those in a step far longer than jobs of their size usually take there.

What each state's steps usually take is learned (``merritt_queue.core.steptimes``) from the
mirror's record of every status write (``JobEvent``, docs/history.md): a step's time runs
from the row that entered the state to the row that left it for the next step, and its size
is the job's ``space_needed``. A process learns the models at most every
``MQ_STALL_MODEL_SECONDS`` (the first page or scrape after that pays for it) and keeps them
in Django's cache meanwhile: one query a state, over the status-and-time index, bounded by
``MQ_STALL_SAMPLES``.

Which jobs are stalled now is one query over the jobs in a step (the status index, and the
timeline's jid index for when each entered its state), kept for ``STALLED_CACHE_SECONDS``:
the job list's filter and ``/metrics`` read that same list. A list page's badges and a job's
page judge only their own rows, with the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs.models import Job, JobEvent
from merritt_queue.core.states import JOB, JOB_STEPS
from merritt_queue.core.steptimes import StepModel, StepSample, Verdict, fit, judge
from ui.cells import age_text

# Which jobs are stalled changes by the minute; the list pages and a scrape need not ask
# more often than this.
STALLED_CACHE_SECONDS = 30
MODELS_KEY = "jobs:stalls:models"
STALLED_KEY = "jobs:stalls:stalled"


def _entered(state) -> Subquery:
    """When the job entered ``state`` last: its latest row into it from another state (a
    note, the same state rewritten, is not an entry)."""
    return Subquery(
        JobEvent.objects.filter(jid=OuterRef("jid"), to_status=state)
        .exclude(from_status=state)
        .order_by("-status_version")
        .values("at")[:1]
    )


def learn(now: datetime | None = None) -> dict[str, StepModel]:
    """Each step's model from its latest finished steps in the window: one query a state."""
    now = now or timezone.now()
    since = now - timedelta(days=settings.MQ_STALL_WINDOW_DAYS)
    out = {}
    for state in JOB_STEPS:
        entry = (
            JobEvent.objects.filter(
                jid=OuterRef("jid"),
                to_status=state,
                status_version__lt=OuterRef("status_version"),
            )
            .exclude(from_status=state)
            .order_by("-status_version")
            .values("at")[:1]
        )
        size = Job.objects.filter(jid=OuterRef("jid")).values("space_needed")[:1]
        rows = (
            JobEvent.objects.filter(to_status=JOB.success[state], from_status=state, at__gte=since)
            .order_by("-at")
            .annotate(entered=Subquery(entry), size=Subquery(size))
            .values_list("at", "entered", "size")[: settings.MQ_STALL_SAMPLES]
        )
        samples = [
            StepSample((left - entered).total_seconds(), size or 0)
            for left, entered, size in rows
            if entered is not None
        ]
        out[state] = fit(state, samples, needed=settings.MQ_STALL_MIN_SAMPLES)
    return out


def models() -> dict[str, StepModel]:
    """The models, learned again once ``MQ_STALL_MODEL_SECONDS`` have passed."""
    found = cache.get(MODELS_KEY)
    if found is None:
        found = learn()
        cache.set(MODELS_KEY, found, settings.MQ_STALL_MODEL_SECONDS)
    return found


@dataclass(frozen=True)
class Stalled:
    jid: str
    verdict: Verdict


def _with_since(rows: QuerySet) -> QuerySet:
    """``rows`` with ``since``: when each entered its state, from its entry row, or its last
    change when the record has none (then its time in the state is a lower bound)."""
    return rows.annotate(since=Coalesce(_entered(OuterRef("status")), F("last_modified")))


def _judge_rows(rows: QuerySet, now: datetime) -> list[tuple[str, Verdict]]:
    """Each job of ``rows`` (in a step, ``_with_since``) judged."""
    known = models()
    found = rows.order_by().values_list("jid", "status", "space_needed", "since")
    floor = settings.MQ_STALL_FLOOR_SECONDS
    out = []
    for jid, status, size, since in found:
        if since is None or status not in known:
            continue
        elapsed = (now - since).total_seconds()
        out.append((jid, judge(known[status], elapsed, size, floor=floor)))
    return out


def find_stalled(now: datetime | None = None) -> list[Stalled]:
    """Every stalled job now. Only jobs longer than the floor in their state are read."""
    now = now or timezone.now()
    floor = now - timedelta(seconds=settings.MQ_STALL_FLOOR_SECONDS)
    steps = Job.objects.filter(status__in=JOB_STEPS, removed_at__isnull=True)
    rows = _with_since(steps).filter(since__lt=floor)
    return [Stalled(jid, v) for jid, v in _judge_rows(rows, now) if v.stalled]


def stalled() -> list[Stalled]:
    """``find_stalled``, kept for ``STALLED_CACHE_SECONDS``."""
    found = cache.get(STALLED_KEY)
    if found is None:
        found = find_stalled()
        cache.set(STALLED_KEY, found, STALLED_CACHE_SECONDS)
    return found


def stalled_jids() -> frozenset[str]:
    return frozenset(s.jid for s in stalled())


def stalled_among(jids: list[str], now: datetime | None = None) -> frozenset[str]:
    """Which of ``jids`` (a list page's rows) are stalled now: one query over those rows
    alone, so a list page does not wait for every job in a step to be judged."""
    if not jids:
        return frozenset()
    rows = _with_since(Job.objects.filter(jid__in=jids, status__in=JOB_STEPS))
    return frozenset(jid for jid, v in _judge_rows(rows, now or timezone.now()) if v.stalled)


def unjudged_states() -> list[str]:
    """The steps with too little history: none of their jobs is ever listed as stalled."""
    return [state for state, model in models().items() if not model.ready]


def stalled_by_state() -> dict[str, int]:
    """Stalled jobs per step, every step (0 included)."""
    counts = dict.fromkeys(JOB_STEPS, 0)
    for s in stalled():
        counts[s.verdict.state] = counts.get(s.verdict.state, 0) + 1
    return counts


def verdict_of(job: Job, now: datetime | None = None) -> Verdict | None:
    """The job's verdict while it is in a step, else None: one query."""
    if job.status not in JOB_STEPS:
        return None
    found = _judge_rows(_with_since(Job.objects.filter(pk=job.pk)), now or timezone.now())
    return found[0][1] if found else None


def words(verdict: Verdict) -> str:
    """ "Downloading for 3 h 10 min; jobs of this size usually take under 40 min"."""
    so_far = f"{verdict.state} for {age_text(timedelta(seconds=verdict.elapsed))}"
    if verdict.usual is None:
        days = settings.MQ_STALL_WINDOW_DAYS
        # Not how many: a depositor reads these words too, and the queue's activity is not theirs.
        return (
            f"{so_far}; too little history to say how long it usually takes (fewer than "
            f"{verdict.needed} finished {verdict.state} steps in the last {days} days): not judged"
        )
    usual = age_text(timedelta(seconds=max(1.0, verdict.usual)))
    return f"{so_far}; jobs of this size usually take under {usual}"


def as_fields(verdict: Verdict) -> dict:
    """The verdict as the status API gives it: whole seconds, the same figures as the page."""
    return {
        "state": verdict.state,
        "seconds_in_state": round(verdict.elapsed),
        "usually_under_seconds": None if verdict.usual is None else round(verdict.usual),
        "stalled": verdict.stalled,
        "judged": verdict.known,
        "words": words(verdict),
    }
