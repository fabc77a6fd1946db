"""Poison jobs: a Failed job whose record shows it failed ``MQ_POISON_FAILURES`` times with
its present cause is quarantined. Bulk resumes (and a resume run's slices) leave it out; a
person resumes it only by naming it, with a reason, on its own.

The count is read from the job's timeline, the mirror's copy of its ``history`` node in
ZooKeeper (docs/history.md), never from a counter of its own: a full reconcile rebuilds it
exactly, and a Redis flush or a lost mirror forgets nothing. A cause is the message's
signature (``ui.signatures``), as the dashboard's causes and the same-cause warning group
them, so "HTTP 500 at <url>" is one cause whatever the URL.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, QuerySet

from jobs.models import Job, JobEvent
from merritt_queue.core.states import JobStatus
from ui.signatures import cause_of

CHUNK = 1000  # ids per query: a bulk resume can name thousands


@dataclass(frozen=True)
class Quarantine:
    jid: str
    failures: int  # times it failed with its present cause
    cause: str
    example: str  # its present message
    attempts: tuple = ()  # its failures, oldest first, as its timeline has them: (when, message)

    @property
    def words(self) -> str:
        return f"quarantined: failed {self.failures} times with '{self.example[:120]}'"


def limit() -> int:
    return max(int(settings.MQ_POISON_FAILURES), 1)


def _failed_message(message: str) -> str:
    """A timeline row the mirror only saw after a jump carries the failure's message after
    its own words (``mirror.timeline.jump_message``)."""
    _, sep, rest = message.partition(f"; now {JobStatus.FAILED}: ")
    return rest if sep else message


def of(jids: list[str]) -> dict[str, Quarantine]:
    """Those of ``jids`` that are quarantined, each with its count and cause."""
    found: dict[str, Quarantine] = {}
    need = limit()
    for start in range(0, len(jids), CHUNK):
        chunk = jids[start : start + CHUNK]
        failed = dict(
            Job.objects.filter(jid__in=chunk, status=JobStatus.FAILED).values_list("jid", "message")
        )
        if not failed:
            continue
        counts: dict[str, int] = {}
        seen: dict[str, list] = {}
        causes = {jid: cause_of(message) for jid, message in failed.items()}
        rows = JobEvent.objects.filter(jid__in=list(failed), to_status=JobStatus.FAILED)
        for jid, at, message in rows.order_by("jid", "status_version").values_list(
            "jid", "at", "message"
        ):
            message = _failed_message(message)
            seen.setdefault(jid, []).append((at, message))
            if cause_of(message) == causes[jid]:
                counts[jid] = counts.get(jid, 0) + 1
        for jid, n in counts.items():
            if n >= need:
                found[jid] = Quarantine(jid, n, causes[jid], failed[jid], tuple(seen[jid]))
    return found


def only_quarantined(jobs: QuerySet) -> QuerySet:
    """The quarantined jobs of ``jobs``: the Failed jobs with at least the limit's Failed
    rows in their timeline (counted by the database, over the ``jobevent_status_jid``
    index: no lookup per Failed job), then their status and causes checked (``of``)."""
    failed = jobs.filter(status=JobStatus.FAILED)
    often = (
        JobEvent.objects.filter(to_status=JobStatus.FAILED)
        .order_by()
        .values("jid")
        .annotate(n=Count("*"))  # from the (to_status, jid) index alone
        .filter(n__gte=limit())
        .values_list("jid", flat=True)
    )
    return failed.filter(jid__in=list(of(list(often))))
