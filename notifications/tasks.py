"""Sending deliveries: the RQ task on ``mq-notify``, and the sweep that queues what is due.

Guarantees: a delivery is attempted by one worker at a time (a worker claims it with one
conditional UPDATE); each attempt is recorded (``DeliveryAttempt``) and the delivery then
says its outcome: delivered, pending with the time of its next attempt (exponential backoff,
scheduled, never slept), or failed once ``MQ_NOTIFY_ATTEMPTS`` are spent or the answer says a
retry cannot help (an address the SSRF guard refuses, a 4xx). Every attempt carries the same
delivery id, and is signed with the subscription's own secret (``services.webhook``). Redis
holds nothing that the sweep cannot queue again from the database.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import close_old_connections, connection
from django.utils import timezone

from merritt_queue.deposit.urltext import hide_credentials
from merritt_queue.services import webhook

from .models import DELIVERED, EMAIL, FAILED, Delivery, DeliveryAttempt, Subscription
from .outbox import backfill
from .queueing import due, enqueue

log = logging.getLogger(__name__)

# How long a worker's claim on a delivery lasts: beyond any attempt's deadline.
CLAIM = timedelta(minutes=5)
# Deliveries the sweep queues at most per run; the next run takes the rest.
SWEEP_MAX = 1000
# Subscriptions this young are checked for events written before they were (see backfill).
YOUNG = timedelta(minutes=2)
DETAIL_MAX = 500


def sweep() -> int:
    """Queue every due delivery (after a Redis outage, a backoff's end, a gathered e-mail),
    and catch up young subscriptions with events their batch had before them."""
    now = timezone.now()
    for subscription in Subscription.objects.filter(created__gte=now - YOUNG):
        backfill(subscription)
    pks = list(Delivery.objects.filter(due(now)).values_list("pk", flat=True)[:SWEEP_MAX])
    return enqueue(pks)


def run_delivery(pk: int) -> str:
    """The RQ task: one attempt of delivery ``pk`` if it is due and nobody else has it."""
    if not connection.in_atomic_block:  # tests run the worker inside their transaction
        close_old_connections()
    return attempt(pk)


def attempt(pk: int) -> str:
    now = timezone.now()
    if not Delivery.objects.filter(due(now), pk=pk).update(claimed_until=now + CLAIM):
        return "not due"
    delivery = Delivery.objects.select_related("subscription").get(pk=pk)
    if delivery.subscription.channel == EMAIL:
        return _mail(delivery)
    return _post(delivery)


def body_of(delivery: Delivery) -> bytes:
    """The JSON the receiver gets; the same bytes on every attempt."""
    sub = delivery.subscription
    data = {
        "delivery_id": str(delivery.delivery_id),
        "event": delivery.payload,
        "subscription": {"id": sub.pk, "events": sub.events, "source": sub.source},
    }
    return json.dumps(data, sort_keys=True).encode()


def _post(delivery: Delivery) -> str:
    sub = delivery.subscription
    if not sub.secret:
        why = f"subscription {sub.pk} has no signing secret: nothing is sent unsigned"
        return _record([delivery], webhook.Attempt(False, None, why, False))
    result = webhook.post(
        sub.target,
        body_of(delivery),
        secret=sub.secret,
        delivery_id=str(delivery.delivery_id),
        subscription_id=str(sub.pk),
        event=delivery.event_id,
        timeout=settings.MQ_NOTIFY_TIMEOUT,
        allow_loopback=settings.MQ_ALLOW_LOOPBACK,
        allow_private=settings.MQ_ALLOW_PRIVATE,
    )
    return _record([delivery], result)


def _mail(first: Delivery) -> str:
    """One message for every due event of the subscription (claimed here with the first)."""
    sub = first.subscription
    now = timezone.now()
    others = Delivery.objects.filter(due(now), subscription=sub).exclude(pk=first.pk)
    claimed = list(others.values_list("pk", flat=True)[:SWEEP_MAX])
    Delivery.objects.filter(due(now), pk__in=claimed).update(claimed_until=now + CLAIM)
    deliveries = [first, *Delivery.objects.filter(pk__in=claimed, claimed_until=now + CLAIM)]
    lines = [_mail_line(d.payload) for d in deliveries]
    if len(deliveries) == 1:
        subject = " ".join(f"Batch {sub.bid}: {lines[0]}".split())  # one line, whatever the text
    else:
        subject = f"Batch {sub.bid}: {len(deliveries)} events"
    body = "\n".join([f"Batch {sub.bid} ({sub.batch_uuid or 'no batchID'})", "", *lines, ""])
    try:
        send_mail(subject[:200], body, settings.DEFAULT_FROM_EMAIL, sub.addresses)
    except OSError as exc:  # SMTP errors are OSErrors too
        result = webhook.Attempt(False, None, f"not sent: {type(exc).__name__}: {exc}", True)
    except ValueError as exc:  # a header the message cannot carry: no retry mends it
        result = webhook.Attempt(False, None, f"not sent: {exc}", False)
    else:
        result = webhook.Attempt(True, None, f"sent to {', '.join(sub.addresses)}", False)
    return _record(deliveries, result)


def _mail_line(event: dict) -> str:
    item = f"job {event['job_id']}" if event.get("job_id") else "the batch"
    text = f"{item} {event.get('status')}"
    return f"{text}: {event['message']}" if event.get("message") else text


def backoff(attempts: int) -> timedelta:
    """The wait after the ``attempts``-th failure: doubling, capped."""
    seconds = settings.MQ_NOTIFY_BACKOFF * 2 ** (attempts - 1)
    return timedelta(seconds=min(seconds, settings.MQ_NOTIFY_BACKOFF_MAX))


def _record(deliveries: list[Delivery], result: webhook.Attempt) -> str:
    now = timezone.now()
    detail = redact_detail(result.detail)
    for d in deliveries:
        d.attempts += 1
        DeliveryAttempt.objects.create(
            delivery=d,
            number=d.attempts,
            ok=result.delivered,
            http_status=result.status,
            detail=detail,
        )
        d.last_status, d.last_response, d.claimed_until = result.status, detail, None
        if result.delivered:
            d.status, d.delivered, d.next_attempt = DELIVERED, now, None
        elif result.retryable and d.attempts < settings.MQ_NOTIFY_ATTEMPTS:
            d.next_attempt = now + backoff(d.attempts)
        else:
            d.status, d.next_attempt = FAILED, None
        d.save(
            update_fields=[
                "attempts",
                "last_status",
                "last_response",
                "claimed_until",
                "status",
                "delivered",
                "next_attempt",
            ]
        )
    outcome = deliveries[0].status
    if outcome != DELIVERED:
        log.warning(
            "delivery %s of %s: %s (%s)",
            deliveries[0].delivery_id,
            deliveries[0].event_id,
            outcome,
            detail,
        )
    return outcome


def redact_detail(text: str) -> str:
    return hide_credentials(text)[:DETAIL_MAX]
