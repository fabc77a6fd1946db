"""Starting a resume run from the bulk resume's confirmation page: the pace the person
chose, checked (every bad value a clear error, nothing started), and the run with its
items, stored once beside the admin action that audits it."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from steering.actions import execution, wholefilter
from steering.actions.catalog import ACTIONS
from steering.models import AdminAction, ResumeRun, ResumeRunItem

NOW = "now"  # the pace field's value for "all at once", as before runs
BATCH = 1000  # item rows per insert


@dataclass(frozen=True)
class Pace:
    mode: str
    rate: int
    stop_share: float
    stop_min: int


def defaults() -> dict:
    """The form's starting values, from the settings."""
    return {
        "stop_percent": round(float(settings.MQ_RESUME_STOP_SHARE) * 100),
        "stop_min": int(settings.MQ_RESUME_STOP_MIN),
    }


def read_pace(post) -> Pace | str | None:
    """The pace asked for (None: all at once), or what is wrong with it."""
    mode = post.get("pace", NOW) or NOW
    if mode == NOW:
        return None
    if mode not in dict(ResumeRun.MODES):
        return f"{mode!r} is not a pace; choose jobs per minute or jobs at a time"
    try:
        rate = int(post.get("rate", ""))
        percent = float(post.get("stop_percent", defaults()["stop_percent"]))
        stop_min = int(post.get("stop_min", defaults()["stop_min"]))
    except ValueError:
        return "the rate, the share and the sample are whole numbers"
    if rate < 1:
        return "the rate must be at least 1"
    if not 0 < percent <= 100:
        return "the share that stops the run is a percentage, from 1 to 100"
    if stop_min < 1:
        return "the sample before the run may stop itself is at least 1 job"
    return Pace(mode, rate, percent / 100, stop_min)


def begin(record: AdminAction, items: list[tuple[str, int | None]], pace: Pace) -> ResumeRun:
    """The run of ``record`` (a ``job.resume`` recorded with no pending items of its own)
    over ``items``, in the order the confirmation listed them."""
    return _begin(record, [items], pace)


def begin_whole(record: AdminAction, pace: Pace) -> ResumeRun:
    """The run of a summarised selection (``wholefilter``): its jobs read again from the
    mirror a chunk at a time into the run's items, in jid order; those whose row changed
    since the page was shown are audited as skipped, with why, and left out."""
    action = ACTIONS[record.action]
    stream = wholefilter.Stream(record, action, execution.acting_scope(record))

    def chunks():
        for chunk, stale in stream:
            if stale:
                execution.record_skipped(record, stale)
            yield chunk

    run = _begin(record, chunks(), pace)
    record.total += record.skipped
    record.save(update_fields=["total"])
    return run


def _begin(record: AdminAction, chunks, pace: Pace) -> ResumeRun:
    with transaction.atomic():
        run = ResumeRun.objects.create(
            action=record,
            mode=pace.mode,
            rate=pace.rate,
            stop_share=pace.stop_share,
            stop_min=pace.stop_min,
        )
        n = 0
        for chunk in chunks:
            rows = [
                ResumeRunItem(run=run, position=n + k, jid=jid, version=version)
                for k, (jid, version) in enumerate(chunk)
            ]
            ResumeRunItem.objects.bulk_create(rows, batch_size=BATCH)
            n += len(rows)
        record.total = n
        record.params = {**record.params, "run": run.pk}
        record.save(update_fields=["total", "params"])
    return run
