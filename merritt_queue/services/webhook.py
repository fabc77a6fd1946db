"""One signed POST of a webhook delivery, and the signature a receiver checks.

Guarantees: ``sign`` is HMAC-SHA256 with the profile's secret over ``timestamp + "." + body``,
so a receiver that checks it and the timestamp's age knows who sent the body and rejects a
replay; the headers carry the delivery id, the same on every attempt, for the receiver to
drop repeats. ``post`` makes exactly one attempt (the caller schedules retries, so no worker
sleeps): the URL passes ``netpolicy.check_url`` first and the POST goes to an address it
judged (``transport.post_once``), redirects are not followed, nothing of the operator's
environment (netrc credentials, a proxy) is used, one wall-clock deadline covers connect to
the answer's last byte, and at most ``EXCERPT`` bytes of the answer are read, with any
credentials in them hidden. It never raises for the network or the receiver: the
``Attempt`` says what happened and whether another try may help.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

import requests

from . import httputil, transport
from .errors import FetchError
from .netpolicy import hide_credentials, redact

DELIVERY_HEADER = "X-Merritt-Queue-Delivery"
EVENT_HEADER = "X-Merritt-Queue-Event"
TIMESTAMP_HEADER = "X-Merritt-Queue-Timestamp"
SIGNATURE_HEADER = "X-Merritt-Queue-Signature"
# Bytes of a receiver's answer kept for the delivery's record.
EXCERPT = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value: ``sha256=<hex>``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def verify(
    secret: str,
    timestamp: str,
    body: bytes,
    signature: str,
    *,
    tolerance: float = 300,
    now: float | None = None,
) -> bool:
    """What a receiver does: the signature matches and the timestamp is recent."""
    try:
        stamp = int(timestamp)
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - stamp) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, stamp, body), signature)


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
    event: str,
    timeout: float = 10,
    allow_loopback: bool = False,
    allow_private: bool = False,
    session_factory=requests.Session,
    now: float | None = None,
) -> Attempt:
    """POST ``body`` (JSON) to ``url``, signed; one attempt."""
    stamp = int(time.time() if now is None else now)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "merritt-queue-webhook",
        DELIVERY_HEADER: delivery_id,
        "Idempotency-Key": delivery_id,
        EVENT_HEADER: event,
        TIMESTAMP_HEADER: str(stamp),
        SIGNATURE_HEADER: sign(secret, stamp, body),
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
