"""When a submission's jobs should be done: the work already ahead of them and theirs, at
the pace jobs finished in the last hour (``ui.ahead``, as the dashboard and a release's
confirmation page read it). No job finished in the last hour: no forecast, said so."""

from __future__ import annotations

from datetime import datetime, timedelta

from jobs.models import Job
from merritt_queue.core.forecast import backlog_seconds
from ui.ahead import BACKLOG, last_hour


def predicted_finish(jobs: int, now: datetime, exclude_bid: str = "") -> dict:
    ahead = Job.objects.filter(status__in=BACKLOG, removed_at__isnull=True)
    if exclude_bid:  # the batch's own jobs, once it has some, are its, not ahead of it
        ahead = ahead.exclude(batch_id=exclude_bid)
    waiting = ahead.count()
    rate = last_hour(now).finished
    seconds = backlog_seconds(waiting + jobs, rate)
    if seconds is None:
        basis = f"no job finished in the last hour; {waiting} jobs ahead and {jobs} of these"
    else:
        basis = (
            f"{waiting} jobs ahead and {jobs} of these, at the {rate} jobs that finished in "
            "the last hour"
        )
    return {
        "seconds": None if seconds is None else round(seconds),
        "at": None if seconds is None else (now + timedelta(seconds=seconds)).isoformat(),
        "basis": basis,
        "jobs_ahead": waiting,
        "finished_last_hour": rate,
    }
