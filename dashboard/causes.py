"""The causes of failed jobs: their messages grouped by signature (ui.signatures).

One cause can carry as many texts as there are files (a digest, a URL, an ARK in each), so
the dashboard groups by signature, not by exact text. The mirror writes each job's
signature with its message (``Job.signature``): the database counts the causes over the
(status, signature) index, then gives the top causes' texts, most frequent first, for an
example and how many texts each groups. The result is kept in Django's cache for
CAUSES_CACHE_SECONDS, as the dashboard's other full aggregates.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.core.cache import cache
from django.db.models import Count
from django.urls import reverse

from dashboard.queries import jobs_url
from jobs.models import Job
from merritt_queue.core.states import JobStatus
from ui.signatures import NO_MESSAGE

TOP_CAUSES = 10
CAUSES_CACHE_SECONDS = 10


@dataclass
class Cause:
    signature: str
    example: str  # the cause's most frequent text
    count: int
    texts: int  # how many different texts it groups

    @property
    def label(self) -> str:
        return "(no message)" if self.signature == NO_MESSAGE else self.signature

    @property
    def filter(self) -> dict[str, str]:
        return {"status": JobStatus.FAILED.value, "signature": self.signature}

    @property
    def href(self) -> str:
        return jobs_url(**self.filter)

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
    failed = Job.objects.filter(status=JobStatus.FAILED).order_by()
    top = list(
        failed.values_list("signature").annotate(n=Count("*")).order_by("-n", "signature")[:limit]
    )
    texts = (
        failed.filter(signature__in=[sig for sig, _ in top])
        .values_list("signature", "message")
        .annotate(n=Count("id"))
        .order_by("-n", "message")
    )
    example: dict[str, str] = {}
    variety: dict[str, int] = {}
    for sig, message, _ in texts:  # most frequent first: the first is the example
        example.setdefault(sig, message)
        variety[sig] = variety.get(sig, 0) + 1
    return [Cause(sig, example.get(sig, ""), n, variety.get(sig, 0)) for sig, n in top]
