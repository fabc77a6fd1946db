"""A submission's subscription: its fields checked at the door, and the rows made for it.

The submission may name ``notify_url`` (a webhook), ``notify_emails`` (comma-separated) and
``notify_events`` (``all``, ``failures`` or ``completion``; ``all`` when left out). Without
them the profile's defaults apply: its ``notify_url`` with its ``notify_events``, and its
addresses for failures when ``mail_failures`` is on. The fields are kept in the database, not
in the batch's ZooKeeper node, which Merritt's ingest also reads.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from batches.models import Profile
from merritt_queue.services.errors import FetchError
from merritt_queue.services.netpolicy import check_url

from .models import ALL, EMAIL, EVENT_FILTERS, FAILURES, PROFILE, WEBHOOK, Subscription
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
    if url and (problem := url_problem(url)):
        out.append(f"notify_url: {problem}")
    if emails:
        out += email_problems(emails)
    return out


def url_problem(url: str) -> str | None:
    """The network policy's checks that need no name lookup (the worker checks again, the
    name's addresses included, before every attempt)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        literal = host == "localhost" or host.endswith(".localhost")
        if literal and not settings.MQ_ALLOW_LOOPBACK:
            return f"refused {url}: {host} is this machine (a loopback address)"
        host = ""  # a name: resolved when the delivery is made, not here
    try:
        if host:
            check_url(
                url,
                allow_loopback=settings.MQ_ALLOW_LOOPBACK,
                allow_private=settings.MQ_ALLOW_PRIVATE,
            )
        else:
            _static(url)
    except FetchError as exc:
        return exc.message
    return None


def _static(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise FetchError(f"must be an http or https URL, not {parts.scheme or 'a bare path'!r}")
    if not parts.hostname:
        raise FetchError("names no host")
    if parts.netloc.rpartition("@")[0]:
        raise FetchError(
            "holds a user name or password (user:password@host); credentials in URLs are "
            "not accepted"
        )
    try:
        parts.port  # noqa: B018 (it raises for a port out of range)
    except ValueError:
        raise FetchError("the port is not a number between 0 and 65535") from None


def addresses(text: str) -> list[str]:
    return [a.strip() for a in text.replace(";", ",").replace(" ", ",").split(",") if a.strip()]


def email_problems(text: str) -> list[str]:
    found = addresses(text)
    out = []
    if len(found) > MAX_EMAILS:
        out.append(f"notify_emails names {len(found)} addresses; at most {MAX_EMAILS}")
    for address in found[: MAX_EMAILS + 1]:
        try:
            validate_email(address)
        except ValidationError:
            out.append(f"notify_emails: {address[:100]!r} is not an e-mail address")
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
            backfill(subscription)
    return made
