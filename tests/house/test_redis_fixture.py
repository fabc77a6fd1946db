"""The ``redis`` fixture empties only the Redis the harness started, or an empty database.

Another database of the harness's server (number 15) stands in for a developer's Redis: same
server, but not the URL the harness exported.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest
from redis import Redis

from tests.redisdb import HARNESS_URL_VAR, claimed


@pytest.fixture
def harness_server() -> str:
    """REDIS_URL, when make test started that server: these tests empty databases of it,
    which on a developer's own Redis would be the very loss the fixture guards against."""
    url = os.environ.get("REDIS_URL", "")
    if not url or os.environ.get(HARNESS_URL_VAR) != url:
        pytest.skip("only on the Redis make test started (MQ_TEST_REDIS_URL is REDIS_URL)")
    return url


@pytest.fixture
def foreign_url(harness_server) -> str:
    """A database the harness did not hand to the tests, empty before and after."""
    url = urlsplit(harness_server)._replace(path="/15").geturl()
    assert url != os.environ.get(HARNESS_URL_VAR)
    conn = Redis.from_url(url)
    conn.flushdb()
    yield url
    conn.flushdb()
    conn.close()


def test_a_foreign_database_with_keys_is_refused_and_left_alone(foreign_url):
    foreign = Redis.from_url(foreign_url)
    foreign.mset({"someone:a": 1, "someone:b": 2})
    with pytest.raises(pytest.fail.Exception) as refused:
        with claimed(foreign_url):
            pytest.fail("a database with keys was handed to a test")
    message = str(refused.value)
    assert f"REDIS_URL={foreign_url} holds 2 keys" in message
    assert "make test" in message
    assert foreign.dbsize() == 2


def test_a_foreign_database_that_is_empty_is_used_and_emptied_after(foreign_url):
    with claimed(foreign_url) as conn:
        conn.set("test:key", 1)
    assert Redis.from_url(foreign_url).dbsize() == 0


def test_the_harness_database_is_emptied_whatever_it_holds(harness_server):
    url = harness_server
    Redis.from_url(url).set("left:by:another:test", 1)
    with claimed(url) as conn:
        assert conn.dbsize() == 0


def test_a_password_in_the_url_is_not_printed(monkeypatch):
    monkeypatch.setattr(Redis, "dbsize", lambda self: 1)
    with pytest.raises(pytest.fail.Exception) as refused:
        with claimed("redis://default:s3cret@127.0.0.1:1/15"):
            pass
    message = str(refused.value)
    assert "s3cret" not in message
    assert "REDIS_URL=redis://default:***@127.0.0.1:1/15 holds 1 key and" in message
