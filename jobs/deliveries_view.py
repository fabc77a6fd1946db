"""The notifications a job's state changes sent to its batch's subscribers (the
``notifications`` app's deliveries), for the job page's "What each step did" and the status
API. They are sent after the job's step, without its lock, so the step's own record in
ZooKeeper does not hold them; the ``notifications`` app keeps them, with every try.

Read by the batch's subscriptions and the unique index of (subscription, event id), whose
ids start ``job:<JID>:``: a job page stays one indexed read however many deliveries there are.
"""

from __future__ import annotations

from typing import Any

from merritt_queue.deposit.urltext import redact
from notifications.models import WEBHOOK, Delivery, Subscription

# At most this many are shown: a job enters few states.
MAX_SHOWN = 50


def job_deliveries(bid: str | None, jid: str, everything: bool) -> list[dict[str, Any]]:
    """Each delivery of ``jid``'s events, oldest first. ``everything``: a reader of every
    collection, who also sees where each went; a depositor sees the channel and the status."""
    if not bid:
        return []
    subscriptions = {s.pk: s for s in Subscription.objects.filter(bid=bid)}
    if not subscriptions:
        return []
    rows = Delivery.objects.filter(
        subscription__in=list(subscriptions), event_id__startswith=f"job:{jid}:"
    ).order_by("created", "id")[:MAX_SHOWN]
    out = []
    for d in rows:
        subscription = subscriptions[d.subscription_id]
        shown: dict[str, Any] = {
            "channel": subscription.channel,
            "to_status": d.to_status,
            "status": d.status,
            "tries": d.attempts,
            "http": d.last_status,
        }
        if everything:
            target = subscription.target
            shown["to"] = redact(target) if subscription.channel == WEBHOOK else target
        out.append(shown)
    return out
