"""Notifying a depositor's callback URL that a job finished.

Guarantees: the URL passes ``netpolicy.check_url`` before every attempt, which connects only
to the addresses that check judged (``transport.post_once``); the payload is POSTed
as JSON with the same ``Idempotency-Key`` header on every attempt, so a receiver can drop the
duplicates that retries after a lost answer produce (delivery is at least once, not exactly
once); connection errors, timeouts, 408, 429 and 5xx are retried with exponential backoff
(Retry-After honoured up to 30 s), ``retries`` being the total number of attempts; redirects
are not followed, and nothing of the operator's environment (netrc credentials, a proxy) is
used (``transport.strict_session``). Failure raises ``NotifyError`` naming the URL and the
last status or reason. Each attempt has one wall-clock ``deadline`` from connect to the
answer's last byte (by default the read timeout), so a receiver that trickles its answer
cannot hold the worker.
"""

from __future__ import annotations

import json
import logging
import time
import uuid

import requests

from ..core import steplog
from ..deposit.urltext import redact
from . import httputil, transport
from .errors import FetchError, NotifyError

log = logging.getLogger(__name__)


class CallbackNotifier:
    def __init__(
        self,
        timeout: float | tuple[float, float] = 10,
        retries: int = 3,
        backoff: float = 0.5,
        allow_loopback: bool = False,
        allow_private: bool = False,
        session_factory=requests.Session,
        deadline: float | None = None,
    ) -> None:
        if retries < 1:
            raise ValueError("retries is the number of attempts and must be at least 1")
        self.timeout = httputil.timeouts(timeout)
        self.retries = retries
        self.backoff = backoff
        self.allow_loopback = allow_loopback
        self.allow_private = allow_private
        self.session_factory = session_factory
        self.deadline = deadline if deadline is not None else self.timeout[1]

    def notify(self, url: str, payload: dict, *, idempotency_key: str | None = None) -> None:
        """POST ``payload`` as JSON to ``url``; ``NotifyError`` when it cannot be delivered."""
        body = json.dumps(payload, sort_keys=True).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": idempotency_key or uuid.uuid4().hex,
        }
        for attempt in range(1, self.retries + 1):
            try:
                return self._attempt(url, body, headers)
            except _Retry as exc:
                if attempt == self.retries:
                    raise NotifyError(
                        f"callback {url} failed after {httputil.attempts_text(attempt)}: "
                        f"{exc.reason}",
                        retryable=True,
                    ) from None
                log.warning("callback %s attempt %d failed (%s); retrying", url, attempt, exc)
                httputil.sleep_before_retry(exc.delay, self.backoff, attempt)

    def _attempt(self, url: str, body: bytes, headers: dict) -> None:
        began = time.monotonic()
        try:
            # Only the status matters: the answer's body is never read.
            resp, _ = transport.post_once(
                url,
                body,
                headers,
                timeout=self.timeout,
                deadline=self.deadline,
                session_factory=self.session_factory,
                allow_loopback=self.allow_loopback,
                allow_private=self.allow_private,
            )
        except FetchError as exc:  # refused by the network policy: nothing was sent
            _note(url, began, error=exc.message)
            raise NotifyError(f"callback {exc.message}", retryable=exc.retryable) from exc
        except transport.TooSlow as exc:
            _note(url, began, error="too slow")
            raise _Retry(
                f"the receiver is too slow: no complete answer within {self.deadline:g} s "
                "(the callback deadline)"
            ) from exc
        except requests.RequestException as exc:
            _note(url, began, error=httputil.describe(exc))
            if not httputil.is_transient(exc):
                raise NotifyError(f"callback {url} failed: {httputil.describe(exc)}") from exc
            raise _Retry(httputil.describe(exc)) from exc
        _note(url, began, http=resp.status_code, ok=200 <= resp.status_code < 300)
        if 200 <= resp.status_code < 300:
            return
        status = httputil.status_text(resp)
        if httputil.is_retryable_status(resp.status_code):
            raise _Retry(status, httputil.retry_after(resp))
        raise NotifyError(f"callback {url} refused the notification: {status}")


def _note(url: str, began: float, **fields) -> None:
    steplog.note(
        "callback",
        to=redact(url),
        ms=round((time.monotonic() - began) * 1000),
        **{"ok": False} | fields,
    )


class _Retry(Exception):
    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay
