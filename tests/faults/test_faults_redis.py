"""Redis loses everything mid-batch (FLUSHALL, or killed and started again empty).

Redis holds nothing that ZooKeeper cannot rebuild: the dispatcher enqueues every job again
from the tree, the workers ride out the outage, and each job is done exactly once. The test
runs its own redis-server (``services.sh redis-start``) so the suite's Redis is untouched.
"""

from __future__ import annotations

import time

import pytest
from redis import Redis

from tests.cluster import assert_survived, start_mid_batch

pytest_plugins = ["tests.cluster", "tests.httpserver"]
pytestmark = pytest.mark.faults

JOBS = 8


@pytest.fixture
def mid_batch(make_cluster, zk_config, store, own_redis, http_server):
    """A cluster on the test's own Redis, a batch under way on it: (cluster, batch id)."""
    cluster = make_cluster(
        zk_hosts=zk_config.hosts, chroot=zk_config.chroot, redis_url=own_redis.url
    )
    return cluster, start_mid_batch(cluster, store, http_server, JOBS)


def test_redis_flushed_mid_batch(mid_batch, store, own_redis):
    cluster, bid = mid_batch
    Redis.from_url(own_redis.url).flushall()
    assert_survived(cluster, store, bid, JOBS)


@pytest.mark.slow
def test_redis_restarted_empty_mid_batch(mid_batch, store, own_redis):
    cluster, bid = mid_batch
    own_redis.kill()
    time.sleep(3)  # an outage, not a blip: the workers and the dispatcher see it
    own_redis.start()
    assert_survived(cluster, store, bid, JOBS)
