"""Reading a moment, and saying plainly when the record cannot answer for it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Min
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from batches.models import Batch, BatchEvent
from jobs.models import Job, JobEvent
from merritt_queue.core.tree import is_batch_id, is_job_id
from steering.models import AdminActionItem

from .scope import Scope

# The ids a refusal names; the rest are counted.
NAMED = 5
LIMITED = (
    "some items in the queue at this moment were removed by a cleanup since and left no "
    "record here: the counts may miss some of your collections' items"
)


class Refused(ValueError):
    """A moment the record cannot show; the message says why, to the person."""


def shown(at: datetime) -> str:
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M:%S %z")


def parse(text: str) -> datetime:
    """An ISO 8601 time (``2026-03-10T12:00``, with seconds, ``Z`` or an offset); without
    a zone, in the site's (``TIME_ZONE``), as the page's picker sends it. ``now``: now."""
    if text.strip().lower() == "now":
        return timezone.now()
    value = None
    # A "+01:00" left unencoded in a URL's query arrives as " 01:00".
    text = re.sub(r"(\d) (\d\d:?\d\d)$", r"\1+\2", text.strip())
    try:
        value = parse_datetime(text.replace(" ", "T", 1))
    except ValueError:
        pass
    if value is None:
        raise Refused(
            f"{text[:60]!r} is not a time: give it as 2026-03-10T12:00 (the site's zone, "
            f"{timezone.get_current_timezone_name()}) or with a zone, 2026-03-10T20:00Z"
        )
    if timezone.is_naive(value):
        value = timezone.make_aware(value)
    return value


def history_start() -> datetime | None:
    """The oldest status write recorded, of a job or a batch: nothing is known before it."""
    firsts = [m.objects.aggregate(first=Min("at"))["first"] for m in (JobEvent, BatchEvent)]
    known = [f for f in firsts if f is not None]
    return min(known) if known else None


def check(at: datetime, now: datetime | None = None) -> None:
    now = now or timezone.now()
    if at > now:
        raise Refused(
            f"{shown(at)} is in the future (it is {shown(now)} now): the record says "
            "nothing of it yet"
        )
    start = history_start()
    if start is None:
        raise Refused("nothing is recorded yet: no job or batch has a status write")
    if at < start:
        raise Refused(
            f"{shown(at)} is before the recorded history begins ({shown(start)}): "
            "nothing is known of the queue before it"
        )


def check_pair(a: datetime, b: datetime) -> None:
    check(a)
    check(b)
    if b <= a:
        raise Refused(f"the second moment ({shown(b)}) must come after the first ({shown(a)})")


@dataclass
class Missing:
    jobs: int | None  # None: not told (a limited scope)
    batches: int | None
    text: str


def missing(at: datetime, scope: Scope) -> Missing:
    """Items that were in the queue at ``at`` and whose record is gone: removed after it
    (``cleanup``, retention, Purge now) before the mirror kept removed items' rows.

    A removal's audit row names no collection, and the item's own rows are gone: which
    collection it was of is not known. A person limited to some collections is told only
    that something was removed, not the ids, how many, or the administrators' reasons."""
    removed = AdminActionItem.objects.filter(
        admin_action__action__in=("cleanup", "batch.purge"),
        admin_action__started__gt=at,
        result="done",
    ).exclude(detail__startswith="would")
    gone = removed.exclude(item_id__in=Job.objects.values("jid")).exclude(
        item_id__in=Batch.objects.values("bid")
    )
    ids = list(gone.order_by().values_list("item_id", "admin_action__reason").distinct())
    jobs = sorted({i for i, _ in ids if is_job_id(i)})
    batches = sorted({i for i, _ in ids if is_batch_id(i)})
    if not jobs and not batches:
        return Missing(0, 0, "")
    if not scope.everything:
        return Missing(None, None, LIMITED)
    why = sorted({r for _, r in ids})
    named = ", ".join((jobs + batches)[:NAMED])
    more = len(jobs) + len(batches) - NAMED
    if more > 0:
        named += f" and {more} more"
    text = (
        f"{len(jobs)} job(s) and {len(batches)} batch(es) removed from the queue after this "
        f"moment ({'; '.join(why)}) left no record here ({named}): they are missing from "
        "these counts"
    )
    return Missing(len(jobs), len(batches), text)
