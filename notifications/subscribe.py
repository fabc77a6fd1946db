"""A submission's subscription: its fields checked at the door, and the rows made for it.

The submission may name ``notify_url`` (a webhook), ``notify_emails`` (comma-separated) and
``notify_events`` (``all``, ``failures`` or ``completion``; ``all`` when left out). Without
them the profile's defaults apply: its ``notify_url`` with its ``notify_events``, and its
addresses for failures when ``mail_failures`` is on. The fields are kept in the database, not
in the batch's ZooKeeper node, which Merritt's ingest also reads. Each subscription has its
own signing secret (``keys``): the submission's webhook a random one, returned here once for
the submission's answer; the profile's default one derived from the profile's key.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction

from batches.models import Profile
from merritt_queue.deposit import fields
from merritt_queue.services.errors import FetchError
from merritt_queue.services.netpolicy import check_url

from .keys import derived
from .mailbox import mailbox_problem
from .models import (
    ALL,
    EMAIL,
    EVENT_FILTERS,
    FAILURES,
    PROFILE,
    SUBMISSION,
    WEBHOOK,
    Subscription,
)
from .outbox import backfill

FIELDS = {"notify_url": 2048, "notify_events": 12, "notify_emails": 2000}
MAX_EMAILS = 10
EVENTS = tuple(name for name, _ in EVENT_FILTERS)


def problems(clean: dict) -> list[str]:
    """What is wrong with the submission's notification fields (``clean``: stripped text)."""
    out = []
    url, emails, events = (clean.get(k) for k in ("notify_url", "notify_emails", "notify_events"))
    if events and events not in EVENTS:
        out.append(f"notify_events must be one of {', '.join(EVENTS)}, not {events[:20]!r}")
    if events and not (url or emails):
        out.append("notify_events needs notify_url or notify_emails to send the events to")
    if url:
        out += url_problems(url)
    if emails:
        out += email_problems(emails)
    return out


def url_problems(url: str) -> list[str]:
    """The checks every door makes of a URL a depositor gives, and the network policy's of
    an address written in the URL itself (the worker checks again, the name's addresses
    included, before every attempt; a name is not looked up here)."""
    if found := fields.url_problems(url, "notify_url"):
        return found
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        if settings.MQ_ALLOW_LOOPBACK:
            return []
        return [f"notify_url: refused {url}: {host} is this machine (a loopback address)"]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return []
    try:
        check_url(
            url,
            allow_loopback=settings.MQ_ALLOW_LOOPBACK,
            allow_private=settings.MQ_ALLOW_PRIVATE,
        )
    except FetchError as exc:
        return [f"notify_url: {exc.message}"]
    return []


def addresses(text: str) -> list[str]:
    return [a.strip() for a in text.replace(";", ",").replace(" ", ",").split(",") if a.strip()]


def email_problems(text: str) -> list[str]:
    found = addresses(text)
    out = []
    if len(found) > MAX_EMAILS:
        out.append(f"notify_emails names {len(found)} addresses; at most {MAX_EMAILS}")
    for address in found[: MAX_EMAILS + 1]:
        if problem := mailbox_problem(address, "notify_emails"):
            out.append(problem)
    return out


def take(clean: dict) -> dict:
    """Remove the notification fields from the submission (they are not written to
    ZooKeeper) and return them."""
    return {k: clean.pop(k) for k in FIELDS if k in clean}


def subscribe(bid: str, clean: dict, wishes: dict) -> list[Subscription]:
    """The batch's subscriptions (the submission's, else the profile's defaults), with
    deliveries for the events the mirror already has of it."""
    profile = Profile.objects.filter(name=clean.get("profile")).first()
    if profile is None:
        return []
    common = {"bid": bid, "batch_uuid": clean.get("batchID", ""), "profile": profile.name}
    made = []
    events = wishes.get("notify_events") or ALL
    if wishes.get("notify_url"):
        made.append(Subscription(channel=WEBHOOK, target=wishes["notify_url"], events=events))
    elif profile.notify_url:
        made.append(
            Subscription(
                channel=WEBHOOK,
                target=profile.notify_url,
                events=profile.notify_events,
                source=PROFILE,
            )
        )
    if wishes.get("notify_emails"):
        target = ", ".join(addresses(wishes["notify_emails"]))
        made.append(Subscription(channel=EMAIL, target=target, events=events))
    elif profile.mail_failures and profile.emails:
        made.append(
            Subscription(
                channel=EMAIL, target=", ".join(profile.emails), events=FAILURES, source=PROFILE
            )
        )
    with transaction.atomic():
        for subscription in made:
            for key, value in common.items():
                setattr(subscription, key, value)
            subscription.save()
            if subscription.source == PROFILE and subscription.channel == WEBHOOK:
                subscription.secret = derived(profile.notify_secret, subscription.pk)
                subscription.save(update_fields=["secret"])
            backfill(subscription)
    return made


def webhook_credentials(made: list[Subscription]) -> dict | None:
    """What the depositor's receiver needs of the webhook the submission named: its
    subscription id and secret, for the submission's answer (the only time it is shown)."""
    for subscription in made:
        if subscription.channel == WEBHOOK and subscription.source == SUBMISSION:
            return {"subscription_id": subscription.pk, "secret": subscription.secret}
    return None
