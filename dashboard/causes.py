"""The causes of failed jobs: their messages grouped by signature (ui.signatures).

One cause can carry as many texts as there are files (a digest, a URL, an ARK in each), so
the dashboard groups by signature, not by exact text. The database groups by text (one
query over the failed jobs' status index); the texts are then grouped here. With many
different texts (every digest its own) that takes tens of milliseconds, so the result is
kept in Django's cache for CAUSES_CACHE_SECONDS, as the dashboard's other full aggregates.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.core.cache import cache
from django.db.models import Count
from django.urls import reverse

from jobs.models import Job
from merritt_queue.core.states import JobStatus
from ui.signatures import signature

TOP_CAUSES = 10
CAUSES_CACHE_SECONDS = 10
JOBS_URL = "/jobs/"


@dataclass
class Cause:
    signature: str
    example: str  # the cause's most frequent text
    count: int
    texts: int  # how many different texts it groups

    @property
    def filter(self) -> dict[str, str]:
        return {"status": JobStatus.FAILED.value, "signature": self.signature}

    @property
    def href(self) -> str:
        return f"{JOBS_URL}?{urlencode(self.filter)}"

    @property
    def resume_href(self) -> str:
        """The bulk resume's confirmation page, for every job of the list ``href`` shows."""
        url = reverse("steering:confirm", args=["job.resume"])
        return f"{url}?{urlencode({'all': '1', **self.filter})}"


def failure_causes(limit: int = TOP_CAUSES) -> list[Cause]:
    """The most frequent causes of failure, with how many failed jobs each has."""
    key = f"dashboard:failure-causes:{limit}"
    causes = cache.get(key)
    if causes is None:
        causes = _causes(limit)
        cache.set(key, causes, CAUSES_CACHE_SECONDS)
    return causes


def _causes(limit: int) -> list[Cause]:
    rows = (
        Job.objects.filter(status=JobStatus.FAILED)
        .order_by()
        .values_list("message")
        .annotate(n=Count("id"))
        .order_by("-n", "message")
    )
    causes: dict[str, Cause] = {}
    for message, n in rows:
        sig = signature(message)
        cause = causes.get(sig)
        if cause is None:
            causes[sig] = Cause(sig, message, n, 1)
        else:  # rows come most frequent first: the example stays the most frequent text
            cause.count += n
            cause.texts += 1
    return sorted(causes.values(), key=lambda c: (-c.count, c.signature))[:limit]
