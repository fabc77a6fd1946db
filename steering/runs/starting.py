"""Starting a resume run from the bulk resume's confirmation page: the pace the person
chose, checked (every bad value a clear error, nothing started), and the run with its
items, stored once beside the admin action that audits it."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

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
    with transaction.atomic():
        run = ResumeRun.objects.create(
            action=record,
            mode=pace.mode,
            rate=pace.rate,
            stop_share=pace.stop_share,
            stop_min=pace.stop_min,
        )
        rows = (
            ResumeRunItem(run=run, position=n, jid=jid, version=version)
            for n, (jid, version) in enumerate(items)
        )
        ResumeRunItem.objects.bulk_create(rows, batch_size=BATCH)
        record.total = len(items)
        record.params = {**record.params, "run": run.pk}
        record.save(update_fields=["total", "params"])
    return run
