"""Small HTTP helpers shared by the adapters: status wording, retry decisions, backoff.

Guarantees: ``retry_delay`` never waits longer than ``RETRY_AFTER_CAP`` seconds whatever a
server's Retry-After says; sessions made by ``session`` never follow redirects on their own.
"""

from __future__ import annotations

import email.utils
import time
from datetime import UTC, datetime
from http import HTTPStatus

import requests

RETRY_AFTER_CAP = 30.0
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


def status_text(resp: requests.Response) -> str:
    """``503 Service Unavailable``, with the standard phrase when the server sent none."""
    phrase = resp.reason
    if not phrase:
        try:
            phrase = HTTPStatus(resp.status_code).phrase
        except ValueError:
            phrase = "(no reason given)"
    return f"{resp.status_code} {phrase}"


def is_retryable_status(code: int) -> bool:
    return code >= 500 or code in (408, 429)


def is_transient(exc: requests.RequestException) -> bool:
    """Connection trouble and timeouts: the same request may work later."""
    return isinstance(
        exc, requests.ConnectionError | requests.Timeout | requests.exceptions.ChunkedEncodingError
    )


def describe(exc: BaseException) -> str:
    """A short, human wording of a requests/urllib3 exception."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return "connection timed out"
    if isinstance(exc, requests.Timeout):
        return "read timed out"
    if isinstance(exc, requests.ConnectionError):
        text = str(exc)
        if "Connection refused" in text:
            return "connection refused"
        if "Name or service not known" in text or "Failed to resolve" in text:
            return "host name could not be resolved"
        return f"connection failed ({_last_line(text)})"
    return _last_line(str(exc)) or type(exc).__name__


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1][:300] if text.strip() else ""


def retry_after(resp: requests.Response) -> float | None:
    """Seconds the server asked us to wait (capped), or None when it did not say."""
    value = resp.headers.get("Retry-After")
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # not '²', which float() refuses
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, min(seconds, RETRY_AFTER_CAP))


def backoff_delay(backoff: float, attempt: int) -> float:
    """Exponential backoff after the ``attempt``-th failure (1-based)."""
    return backoff * (2 ** (attempt - 1))


def sleep_before_retry(resp_delay: float | None, backoff: float, attempt: int) -> None:
    time.sleep(resp_delay if resp_delay is not None else backoff_delay(backoff, attempt))


def timeouts(timeout: float | tuple[float, float]) -> tuple[float, float]:
    """(connect, read) seconds; read applies to each socket read, so to each chunk."""
    if isinstance(timeout, tuple):
        return timeout
    return (float(timeout), float(timeout))


def attempts_text(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"
