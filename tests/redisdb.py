"""The Redis database a test may empty, and the refusal of any other that holds keys.

Tests empty their database before and after each test; which database that may be is the
harness's rule (``harness.redisdb``), the same the benchmarks follow. A suite run by hand
against the wrong Redis fails here instead of deleting someone's queues.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from redis import Redis

from harness.redisdb import HARNESS_URL_VAR, foreign_keys
from merritt_queue.project.reporting import mask_url_credentials

__all__ = ["HARNESS_URL_VAR", "claimed"]


@contextmanager
def claimed(url: str) -> Iterator[Redis]:
    """A connection to ``url``'s database, empty on entry, emptied on exit."""
    conn = Redis.from_url(url)
    try:
        keys = foreign_keys(conn, url)
        if keys:
            pytest.fail(
                f"REDIS_URL={mask_url_credentials(url, '***')} holds {keys} "
                f"key{'s' if keys != 1 else ''} and is not the Redis that `make test` "
                "started: the tests empty their database, so they refuse this one. "
                "Run them with `make test`, or point REDIS_URL at an empty database.",
                pytrace=False,
            )
        conn.flushdb()
        yield conn
        conn.flushdb()
    finally:
        conn.close()
