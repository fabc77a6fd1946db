"""Putting deliveries on ``mq-notify``: which are due, each queued once (an RQ job id per
delivery). Its own module, so that the outbox queues what it wrote and the sweep (``tasks``)
queues what is due, without the two importing each other.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import django_rq
from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from redis.exceptions import RedisError
from rq import Queue
from rq.exceptions import DuplicateJobError

from merritt_queue.core.queues import NOTIFY_QUEUE

from .models import PENDING, Delivery

log = logging.getLogger(__name__)

TASK = "notifications.tasks.run_delivery"


def due(now) -> Q:
    return (
        Q(status=PENDING)
        & (Q(next_attempt__isnull=True) | Q(next_attempt__lte=now))
        & (Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
    )


def queue_deliveries(keys: Iterable[tuple[int, str]]) -> int:
    """Queue the due deliveries of these (subscription id, event id) keys; how many."""
    wanted = set(keys)
    subs = {s for s, _ in wanted}
    events = {e for _, e in wanted}
    pks = [
        pk
        for pk, s, e in Delivery.objects.filter(
            due(timezone.now()), subscription_id__in=subs, event_id__in=events
        ).values_list("pk", "subscription_id", "event_id")
        if (s, e) in wanted
    ]
    return enqueue(pks)


def enqueue(pks: list[int]) -> int:
    if not pks:
        return 0
    try:
        queue = Queue(NOTIFY_QUEUE, connection=django_rq.get_connection("default"))
        count = 0
        for pk in pks:
            try:
                queue.enqueue_call(
                    TASK,
                    args=(pk,),
                    job_id=f"mq-notify-{pk}",
                    result_ttl=0,
                    unique=True,
                    timeout=int(settings.MQ_NOTIFY_TIMEOUT * 3 + 60),
                )
                count += 1
            except DuplicateJobError:
                pass  # queued or running already
        return count
    except RedisError as exc:
        # Never into the caller (a mirror write, a submission): the sweep queues them later.
        log.warning("%d deliveries not queued now (%s); the sweep will", len(pks), exc)
        return 0
