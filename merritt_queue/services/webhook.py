"""One signed POST of a webhook delivery, and the check a receiver makes of it.

Guarantees: ``sign`` is HMAC-SHA256, keyed with the subscription's own secret, over the
versioned canonical string ``v2:<timestamp>:<delivery id>:<subscription id>:<body>``. A
receiver that checks it with its secret and its subscription id, checks the timestamp's
window, and takes each delivery id once, knows the body was sent by the queue to it, for
this delivery: a delivery captured from another subscriber fails (another secret, another
subscription id), and so does one whose delivery-id, subscription or timestamp header was
changed. The delivery id is the same on every attempt, so a retry is recognised as such.
``post`` makes exactly one attempt (the caller schedules retries, so no worker
sleeps): the URL passes ``netpolicy.check_url`` first and the POST goes to an address it judged
(``transport.post_once``), redirects are not followed, nothing of
the operator's environment (netrc credentials, a proxy) is used, one wall-clock deadline
covers connect to the answer's last byte, and at most ``EXCERPT`` bytes of the answer are
read, with any credentials in them hidden. It never raises for the network or
the receiver: the ``Attempt`` says what happened and whether another try may help.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

import requests

from ..deposit.urltext import hide_credentials, redact
from . import httputil, transport
from .errors import FetchError

VERSION = "v2"
DELIVERY_HEADER = "X-Merritt-Queue-Delivery"
SUBSCRIPTION_HEADER = "X-Merritt-Queue-Subscription"
EVENT_HEADER = "X-Merritt-Queue-Event"
TIMESTAMP_HEADER = "X-Merritt-Queue-Timestamp"
SIGNATURE_HEADER = "X-Merritt-Queue-Signature"
# Seconds a timestamp may differ from the receiver's clock.
TOLERANCE = 300
# Bytes of a receiver's answer kept for the delivery's record.
EXCERPT = 300
# Unix seconds as the header carries them: ASCII digits only, at most ten.
_TIMESTAMP = re.compile(r"[0-9]{1,10}")


def canonical(timestamp: int, delivery_id: str, subscription_id: str, body: bytes) -> bytes:
    """The signed bytes: every header a replay would change, then the body as sent."""
    return f"{VERSION}:{timestamp}:{delivery_id}:{subscription_id}:".encode() + body


def sign(secret: str, timestamp: int, delivery_id: str, subscription_id: str, body: bytes) -> str:
    """The signature header's value: ``v2=<hex>``."""
    message = canonical(timestamp, delivery_id, subscription_id, body)
    mac = hmac.new(secret.encode(), message, hashlib.sha256)
    return f"{VERSION}={mac.hexdigest()}"


def parse_timestamp(text: str) -> int | None:
    """The header's Unix seconds, or None unless written exactly as sent: no sign, space,
    fraction, exponent, underscore or non-ASCII digit."""
    return int(text) if _TIMESTAMP.fullmatch(text) else None


def verify(
    secret: str,
    subscription_id: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: float = TOLERANCE,
    now: float | None = None,
) -> bool:
    """What a receiver does before taking a delivery (docs/usage.md): the timestamp is
    strict and recent, the delivery is for its own subscription, and the signature matches.
    Taking each delivery id once is the receiver's part: this function keeps no state."""
    lower = {name.lower(): value for name, value in headers.items()}
    stamp = parse_timestamp(lower.get(TIMESTAMP_HEADER.lower(), ""))
    if stamp is None or abs((time.time() if now is None else now) - stamp) > tolerance:
        return False
    if lower.get(SUBSCRIPTION_HEADER.lower()) != subscription_id:
        return False
    delivery_id = lower.get(DELIVERY_HEADER.lower(), "")
    expected = sign(secret, stamp, delivery_id, subscription_id, body)
    return hmac.compare_digest(expected, lower.get(SIGNATURE_HEADER.lower(), ""))


@dataclass(frozen=True)
class Attempt:
    delivered: bool
    status: int | None  # the receiver's HTTP status, None when there was no answer
    detail: str  # the status line or why there was no answer, and an excerpt of the body
    retryable: bool  # whether a later attempt may succeed


def post(
    url: str,
    body: bytes,
    *,
    secret: str,
    delivery_id: str,
    subscription_id: str,
    event: str,
    timeout: float = 10,
    allow_loopback: bool = False,
    allow_private: bool = False,
    session_factory=requests.Session,
    now: float | None = None,
) -> Attempt:
    """POST ``body`` (JSON) to ``url``, signed for ``subscription_id`` with its ``secret``;
    one attempt."""
    stamp = int(time.time() if now is None else now)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "merritt-queue-webhook",
        DELIVERY_HEADER: delivery_id,
        "Idempotency-Key": delivery_id,
        SUBSCRIPTION_HEADER: subscription_id,
        EVENT_HEADER: event,
        TIMESTAMP_HEADER: str(stamp),
        SIGNATURE_HEADER: sign(secret, stamp, delivery_id, subscription_id, body),
    }
    try:
        resp, head = transport.post_once(
            url,
            body,
            headers,
            timeout=httputil.timeouts(timeout),
            deadline=timeout,
            session_factory=session_factory,
            keep=EXCERPT,
            allow_loopback=allow_loopback,
            allow_private=allow_private,
        )
    except FetchError as exc:  # refused by the network policy: nothing was sent
        return Attempt(False, None, exc.message, exc.retryable)
    except requests.RequestException as exc:
        why = str(exc) if isinstance(exc, transport.TooSlow) else httputil.describe(exc)
        return Attempt(False, None, hide_credentials(why), httputil.is_transient(exc))
    excerpt = _excerpt(head)
    status = httputil.status_text(resp)
    detail = f"{status}: {excerpt}" if excerpt else status
    if 200 <= resp.status_code < 300:
        return Attempt(True, resp.status_code, detail, False)
    if resp.status_code in httputil.REDIRECT_STATUSES:
        where = redact(resp.headers.get("Location", ""))
        detail = f"{status}: redirects are not followed (to {where or 'nowhere'})"
    retryable = httputil.is_retryable_status(resp.status_code)
    return Attempt(False, resp.status_code, detail, retryable)


def _excerpt(raw: bytes) -> str:
    """The start of the answer, one line of text without credentials."""
    text = " ".join(raw.decode("utf-8", "replace").split())
    return hide_credentials(text)[:EXCERPT]
