"""The Redis database a test may empty, and the refusal of any other that holds keys.

Tests empty their database before and after each test. That is only safe on the throw-away
Redis that ``scripts/services.sh with-test-services`` (``make test``) starts: it exports
that server's URL as ``MQ_TEST_REDIS_URL`` beside ``REDIS_URL``. A ``REDIS_URL`` naming any
other database (a developer's own, a shared one) is used only if it is empty, so a suite run
by hand against the wrong Redis fails instead of deleting someone's queues.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from redis import Redis

from merritt_queue.project.reporting import mask_url_credentials

HARNESS_URL_VAR = "MQ_TEST_REDIS_URL"


def started_by_harness(url: str) -> bool:
    return url == os.environ.get(HARNESS_URL_VAR)


@contextmanager
def claimed(url: str) -> Iterator[Redis]:
    """A connection to ``url``'s database, empty on entry, emptied on exit."""
    conn = Redis.from_url(url)
    try:
        if not started_by_harness(url):
            keys = conn.dbsize()
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
