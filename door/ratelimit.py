"""How often one user may ask for something costly: a count per user and minute.

Checking a manifest parses up to ``MQ_MAX_MANIFEST_BYTES`` of rows and writes nothing, so
nothing else bounds how often a depositor may have it done. Counted in Django's cache:
per web process with the default in-memory cache, across processes with a shared one
(``CACHES``); a count lost with its process errs toward allowing.
"""

from __future__ import annotations

import hashlib
import time

from django.core.cache import cache

WINDOW_SECONDS = 60


def refusal(scope: str, user, limit: int, setting: str) -> tuple[str, int] | None:
    """Counts this request of ``user`` for ``scope`` (what is asked for, in words); past
    ``limit`` a minute (0: no limit), why it is refused and the seconds until the next
    minute starts, else None."""
    if limit <= 0:
        return None
    now = time.time()
    window = int(now // WINDOW_SECONDS)
    # Hashed: a key any cache backend takes, whatever the scope's words and the user's name.
    who = hashlib.sha256(f"{scope}\0{user.get_username()}".encode()).hexdigest()
    key = f"mq-rate:{who}:{window}"
    cache.add(key, 0, WINDOW_SECONDS * 2)
    try:
        count = cache.incr(key)
    except ValueError:  # evicted between add and incr: this request starts the count
        cache.set(key, 1, WINDOW_SECONDS * 2)
        count = 1
    if count <= limit:
        return None
    wait = max(1, int((window + 1) * WINDOW_SECONDS - now))
    return (
        f"more than {limit} {scope} a minute ({setting}); try again in {wait} s",
        wait,
    )
