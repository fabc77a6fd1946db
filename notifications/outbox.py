"""From timeline rows to deliveries: the outbox, written in the mirror's own transaction.

The mirror calls ``record`` with every write of timeline rows (``mirror.events.listen``): one
row per status version of a job or batch, whoever wrote it (our workers, Merritt's ingest seen
by the follower, a rebuild). Rows of batches nobody subscribed to cost one indexed query per
write and nothing more; rows of a batch with subscriptions, that query and the insert. A row
whose event a subscription already has makes nothing (unique ``(subscription, event_id)``):
the delivery id stays the one the receiver may have seen. Deliveries are queued once the
transaction commits; one that cannot be queued then (Redis away) is found by the sweep
(``tasks.sweep``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from batches.models import BatchEvent
from jobs.models import JobEvent
from merritt_queue.core import approval
from merritt_queue.core.states import BatchStatus, JobStatus
from mirror.sql import select_in

from .models import ALL, COMPLETION, EMAIL, FAILURES, Delivery, Subscription
from .queueing import queue_deliveries

log = logging.getLogger(__name__)

FINAL_BATCH = (BatchStatus.COMPLETED, BatchStatus.FAILED)


def event_id(kind: str, item: str, version: int) -> str:
    return f"{kind}:{item}:{version}"


def wanted(subscription: Subscription, kind: str, to_status: str) -> bool:
    """Whether the subscription takes an entry of ``kind`` (job or batch) into ``to_status``.

    E-mail takes failures and completion only, even when every event was asked for: a
    mail per state of a thousand jobs would bury the ones that matter.
    """
    failure = to_status == JobStatus.FAILED  # the same word for both machines
    completion = kind == "batch" and to_status in FINAL_BATCH
    events = subscription.events
    if subscription.channel == EMAIL and events == ALL:
        return failure or completion
    if events == FAILURES:
        return failure
    if events == COMPLETION:
        return completion
    return events == ALL


def decided(kind: str, row: Mapping[str, Any]) -> bool:
    """Whether the row is an operator's approval or rejection of a batch awaiting approval:
    every subscription of the batch takes it, whatever events it asked for, since the
    depositor is told either way (``merritt_queue.core.approval``)."""
    return kind == "batch" and approval.is_decision(
        row.get("from_status", ""), row["to_status"], row.get("message", "")
    )


def payload(subscription: Subscription, kind: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """What the receiver is told of one state entry (also kept for a resend)."""
    at = row.get("at")
    bid = row.get("bid", "")
    return {
        "id": event_id(kind, row["jid"] if kind == "job" else bid, row["status_version"]),
        "kind": kind,
        "batch_id": bid,
        "batchID": subscription.batch_uuid or None,
        "job_id": row.get("jid") if kind == "job" else None,
        "from_status": row.get("from_status", ""),
        "status": row["to_status"],
        "status_version": row["status_version"],
        "message": row.get("message", ""),
        "at": at.isoformat() if isinstance(at, datetime) else str(at or ""),
    }


# A subscription's columns but its creation time. Every write of timeline rows asks for them,
# so in SQL compiled once (``select_in``), as the mirror's own reads are.
_FIELDS = ("id", "bid", "batch_uuid", "profile", "channel", "target", "events", "source")


def record(kind: str, rows: list[dict[str, Any]]) -> None:
    """Add the deliveries of ``rows`` (``mirror.events`` values of one kind); in the caller's
    transaction, never failing it: a delivery lost here is found again by ``tasks.sweep``."""
    bids = sorted({row.get("bid") or "" for row in rows} - {""})
    found = select_in(Subscription, "bid", bids, _FIELDS) if bids else []
    if not found:
        return
    subscriptions = [Subscription(**values) for values in found]
    try:
        with transaction.atomic():  # a savepoint: a failure here leaves the mirror's write
            made = _add(subscriptions, [(kind, row) for row in rows])
    except DatabaseError:
        log.exception("the deliveries of %d %s event(s) were not recorded", len(rows), kind)
        return
    if made:
        transaction.on_commit(lambda: _queue_after_commit(made))


def _add(
    subscriptions: list[Subscription], events: list[tuple[str, Mapping[str, Any]]]
) -> list[tuple]:
    """Insert the deliveries the subscriptions want; the (subscription, event id) keys."""
    by_bid: dict[str, list[Subscription]] = {}
    for s in subscriptions:
        by_bid.setdefault(s.bid, []).append(s)
    now = timezone.now()
    gather = timedelta(seconds=settings.MQ_NOTIFY_MAIL_GATHER)
    new = []
    for kind, row in events:
        for s in by_bid.get(row.get("bid", ""), []):
            if not (wanted(s, kind, row["to_status"]) or decided(kind, row)):
                continue
            body = payload(s, kind, row)
            new.append(
                Delivery(
                    subscription=s,
                    event_id=body["id"],
                    kind=kind,
                    item=row["jid"] if kind == "job" else row["bid"],
                    to_status=row["to_status"],
                    payload=body,
                    # E-mail waits a moment, so that the failures of one burst make one message.
                    next_attempt=now + gather if s.channel == EMAIL else now,
                )
            )
    Delivery.objects.bulk_create(new, ignore_conflicts=True)
    return [(d.subscription.pk, d.event_id) for d in new]


def _queue_after_commit(keys: list[tuple]) -> None:
    queue_deliveries(keys)


def backfill(subscription: Subscription) -> int:
    """Deliveries for the events the mirror already holds of the subscription's batch: those
    written before the subscription was (the batch's creation, a worker's first steps)."""
    events: list[tuple[str, Mapping[str, Any]]] = [
        ("batch", row)
        for row in BatchEvent.objects.filter(bid=subscription.bid).values(
            "bid", "from_status", "to_status", "status_version", "message", "at"
        )
    ]
    jobs = JobEvent.objects.filter(bid=subscription.bid)
    if subscription.channel == EMAIL or subscription.events != ALL:
        jobs = jobs.filter(to_status=JobStatus.FAILED)
    events += [
        ("job", row)
        for row in jobs.values(
            "jid", "bid", "from_status", "to_status", "status_version", "message", "at"
        )
    ]
    keys = _add([subscription], events)
    if keys:
        transaction.on_commit(lambda: _queue_after_commit(keys))
    return len(keys)
