"""``GET /metrics``: every process's step counts and the figures read at this scrape."""

from __future__ import annotations

import os

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from .access import refusal
from .collector import QueueCollector


def registry() -> CollectorRegistry:
    """A registry for one scrape: the counts of every process sharing the metrics directory
    (the workers' steps), or of this process alone without one, and the queue's figures."""
    reg = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(reg)
    else:
        from merritt_queue.core import metrics

        metrics.register_in(reg)
    reg.register(QueueCollector())
    return reg


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    why = refusal(request)
    if why is not None:
        return HttpResponse(
            f"403 Forbidden: {why}\n", status=403, content_type="text/plain; charset=utf-8"
        )
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
