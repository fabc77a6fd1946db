"""What an e-mail address a depositor or a profile names must be: a mailbox at a domain.

Django's ``validate_email`` also takes an address literal (``x@[127.0.0.1]``) and
``localhost``, which hand the mail server a host of the depositor's choosing instead of a
mailbox. Every address the queue mails to (a submission's ``notify_emails``, a profile's
``notification_emails``) is judged here, and only here.
"""

from __future__ import annotations

import ipaddress

from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator

_SHAPE = EmailValidator(allowlist=[])


def mailbox_problem(address: str, label: str) -> str | None:
    """Why ``address`` is no mailbox address (``label`` names the field), or None."""
    refused = f"{label}: {address[:100]!r} is not a mailbox address (name@domain.example)"
    domain = address.rpartition("@")[2]
    if domain.startswith("[") or "." not in domain.strip("."):
        return refused
    try:
        ipaddress.ip_address(domain)
        return refused
    except ValueError:
        pass
    try:
        _SHAPE(address)
    except ValidationError:
        return refused
    return None


def validate_mailbox_lines(value: str) -> None:
    """A model field's validator: each address of a list (one a line or comma-separated)."""
    for address in [a.strip() for a in value.replace(",", "\n").splitlines() if a.strip()]:
        if problem := mailbox_problem(address, "notification_emails"):
            raise ValidationError(problem)
