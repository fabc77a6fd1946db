"""Which deletions need a second administrator, and how long a request waits for one."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings

# Each deleting action and the kind of MQ_TWO_PERSON_DELETION that covers it.
KIND_OF = {
    "job.delete": "jobs",
    "batch.delete": "batch",
    "batch.purge": "purge",
    "cleanup": "purge",
}
# The audit trail's actions of a request's halves besides the deletion itself.
REQUEST, REJECT, WITHDRAW = "deletion.request", "deletion.reject", "deletion.withdraw"
AUDITED = (REQUEST, REJECT, WITHDRAW)


def required(action_name: str) -> bool:
    """Whether confirming ``action_name`` makes a request rather than acting."""
    kind = KIND_OF.get(action_name)
    return kind is not None and kind in (settings.MQ_TWO_PERSON_DELETION or ())


def on() -> bool:
    return bool(settings.MQ_TWO_PERSON_DELETION)


def expiry() -> timedelta:
    return timedelta(hours=float(settings.MQ_TWO_PERSON_EXPIRY_HOURS))
