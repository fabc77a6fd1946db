"""Which Redis database a run may empty.

Tests and benchmarks flush their database. That is only safe on the throw-away Redis that
``scripts/services.sh with-test-services`` (``make test``, ``make bench``) starts: it exports
that server's URL as ``MQ_TEST_REDIS_URL`` beside ``REDIS_URL``. Any other database (a
developer's own, a shared one) is used only if it is empty, so a run pointed at the wrong
Redis stops instead of deleting someone's queues. Each caller words its own refusal.
"""

from __future__ import annotations

import os

from redis import Redis

HARNESS_URL_VAR = "MQ_TEST_REDIS_URL"


def started_by_harness(url: str) -> bool:
    return url == os.environ.get(HARNESS_URL_VAR)


def foreign_keys(conn: Redis, url: str) -> int:
    """How many keys stand in the way of emptying ``url``'s database: none when the harness
    started it or it is empty."""
    if started_by_harness(url):
        return 0
    return int(conn.dbsize())
