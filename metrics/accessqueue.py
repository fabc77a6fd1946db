"""The access queues' figures: requests by queue and state (from the mirror, one GROUP BY
over a handful of rows) and whether each queue is paused (from ZooKeeper, read with the
rest of the scrape's ZooKeeper facts)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric

from access.models import AccessRequest
from merritt_queue.core import access

UNREADABLE = "unreadable"  # a request whose status MerrittZK cannot load


def read_counts() -> dict[tuple[str, str], int]:
    rows = (
        AccessRequest.objects.filter(removed_at__isnull=True)
        .values_list("queue", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(queue, status or UNREADABLE): n for queue, status, n in rows}


def access_metrics(
    counts: dict[tuple[str, str], int] | None, paused: dict[str, bool] | None
) -> Iterator[Metric]:
    """``mq_access_items{queue,state}`` (every state, 0 included) and
    ``mq_access_queue_paused{queue}``; each left out when its source was away."""
    if counts is not None:
        items = GaugeMetricFamily(
            "mq_access_items",
            "Requests in Merritt's access queues (mirror), by queue and state.",
            labels=["queue", "state"],
        )
        for queue in access.QUEUES:
            for state in (*access.AccessStatus, UNREADABLE):
                items.add_metric([queue, str(state)], counts.get((queue, str(state)), 0))
        yield items
    if paused is not None:
        flag = GaugeMetricFamily(
            "mq_access_queue_paused",
            "1 when the access queue's pause lock (/locks/queue/accessSmall|accessLarge) is set.",
            labels=["queue"],
        )
        for queue in access.QUEUES:
            flag.add_metric([queue], 1 if paused.get(queue) else 0)
        yield flag
