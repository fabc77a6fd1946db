"""``mirror_freshness``: how old the mirror is, for the base template's footer line.

Guarantees: at most one query, and only when a template shows the value; a
database without the mirror's tables gives an empty text instead of an error; a visitor who
has not signed in (the login page) is told nothing about the queue's inside.
"""

from __future__ import annotations

from datetime import datetime

from django.db import DatabaseError
from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from jobs.models import MirrorState

FOLLOWED = ("write-through", "watch")
# How the newest update reached the mirror, in words rather than the mirror's own names.
HOW = {"write-through": "by this site", "watch": "seen in the queue"}


def ago(moment: datetime, now: datetime) -> str:
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    if seconds < 172800:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"


def freshness_text(states: dict[str, datetime], now: datetime) -> str:
    """E.g. "Mirror updated 3 s ago (by this site); last full reconcile 2 min ago"."""
    followed = [(at, name) for name, at in states.items() if name in FOLLOWED]
    full = states.get("full")
    if not followed and not full:
        return "Mirror not filled yet: an administrator runs manage.py reconcile --full"
    if not followed:
        assert full is not None
        return f"Mirror last fully reconciled {ago(full, now)}"
    at, name = max(followed)
    since = f"last full reconcile {ago(full, now)}" if full else "never fully reconciled"
    return f"Mirror updated {ago(at, now)} ({HOW[name]}); {since}"


def _text() -> str:
    try:
        states = dict(
            MirrorState.objects.filter(name__in=[*FOLLOWED, "full"]).values_list("name", "at")
        )
    except DatabaseError:  # not migrated yet: say nothing rather than break every page
        return ""
    return freshness_text(states, timezone.now())


def mirror_freshness(request) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"mirror_freshness": ""}
    return {"mirror_freshness": SimpleLazyObject(_text)}
