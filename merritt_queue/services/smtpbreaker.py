"""Sending e-mail through the ``smtp`` circuit breaker (``breakers``).

E-mail is sent by Django's ``send_mail``, whose failures are ``OSError``s (smtplib's errors
are too), so the callers keep catching ``OSError``: a send refused by the open breaker
raises ``SmtpDown``, one as well, saying since when the mail server is unreachable and
when it is tried again. Only a failure to reach the server counts (refused, timed out,
disconnected, a 4xx answer); a 5xx answer about a message or an address is the server
answering, and never opens the breaker.
"""

from __future__ import annotations

import smtplib
from collections.abc import Callable
from typing import Any

from .breakers import Breakers

NAME = "smtp"


class SmtpDown(ConnectionError):
    """Not sent: the mail server's breaker is open."""


def transient(error: OSError) -> bool:
    if isinstance(error, smtplib.SMTPResponseException):
        return 400 <= error.smtp_code < 500
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return False
    return True  # refused, timed out, disconnected, a name that did not resolve


def send_through(breakers: Breakers, send: Callable[[], Any]) -> Any:
    if not breakers.enabled:
        return send()
    admitted = breakers.admit(NAME)
    if not admitted.allowed:
        raise SmtpDown(admitted.state.explain())
    try:
        result = send()
    except OSError as e:
        if not transient(e):
            breakers.succeeded(admitted)
            raise
        state = breakers.failed(NAME, f"{type(e).__name__}: {e}")
        if state.is_open:
            raise SmtpDown(f"{type(e).__name__}: {e}; {state.explain()}") from e
        raise
    breakers.succeeded(admitted)
    return result
