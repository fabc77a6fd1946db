"""Failed jobs about to be resumed together that failed the same way: a resume changes none
of what they fetch, so unless the cause was fixed outside the queue (the folder put back),
they will likely fail the same way again. The confirmation says so and offers the edit of
the group at once (``steering.actions.bulkedit``).

A cause is the message's signature, the mirror's indexed ``Job.signature`` (``ui.signatures``),
so that a 404 at one URL and a 404 at another are one cause.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Min, QuerySet
from django.http import QueryDict
from django.urls import reverse

from jobs.models import Job
from merritt_queue.core.states import JobStatus

GROUP_MIN = 2  # one job failing as it did is no pattern
SHOWN = 3  # groups named on the page, largest first
CHUNK = 1000  # ids per query: a selection can hold thousands


@dataclass(frozen=True)
class SameCause:
    count: int
    message: str  # one of the group's messages, as an example
    edit_url: str


def same_causes(jids: list[str], *, query: str = "", back: str = "") -> list[SameCause]:
    """The groups of at least ``GROUP_MIN`` of ``jids`` (Failed jobs) with one cause, largest
    first; ``query``: the list's filter when the selection is "all matching" it, so that
    each group's edit selects the group by that filter and its cause."""
    counts: dict[str, int] = {}
    example: dict[str, str] = {}
    for start in range(0, len(jids), CHUNK):
        rows = (
            Job.objects.filter(jid__in=jids[start : start + CHUNK])
            .values("signature")
            .annotate(n=Count("id"), message=Min("message"))
            .order_by()
        )
        for row in rows:
            counts[row["signature"]] = counts.get(row["signature"], 0) + row["n"]
            example.setdefault(row["signature"], row["message"])
    groups = sorted((n, s) for s, n in counts.items() if n >= GROUP_MIN and s)
    return [
        SameCause(n, example[s], _edit_url(s, jids, query, back))
        for n, s in reversed(groups[-SHOWN:])
    ]


def same_causes_of(rows: QuerySet, *, query: str, back: str = "") -> list[SameCause]:
    """``same_causes`` of a selection too large to list (``wholefilter``): its Failed jobs
    counted by cause in the database (``Job``'s status and signature index), one message of
    each group read after; ``query`` is the list's filter."""
    failed = rows.filter(status=JobStatus.FAILED).exclude(signature="").order_by()
    groups = (
        failed.values("signature")
        .annotate(n=Count("id"))
        .filter(n__gte=GROUP_MIN)
        .order_by("-n", "signature")[:SHOWN]
    )
    return [
        SameCause(
            g["n"],
            failed.filter(signature=g["signature"]).values_list("message", flat=True).first() or "",
            _edit_url(g["signature"], [], query, back),
        )
        for g in groups
    ]


def _edit_url(signature: str, jids: list[str], query: str, back: str) -> str:
    selection = QueryDict(query, mutable=True)
    if query:
        selection["all"] = "1"
        selection["signature"] = signature
    else:
        group = Job.objects.filter(jid__in=jids, signature=signature).values_list("jid", flat=True)
        selection["ids"] = ",".join(group)
    if back:
        selection["next"] = back
    return f"{reverse('steering:edit_jobs')}?{selection.urlencode()}"
