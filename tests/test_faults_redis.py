"""Redis loses everything mid-batch (FLUSHALL, or killed and started again empty).

Redis holds nothing that ZooKeeper cannot rebuild: the dispatcher enqueues every job again
from the tree, the workers ride out the outage, and each job is done exactly once. The test
runs its own redis-server (``services.sh redis-start``) so the suite's Redis is untouched.
"""

from __future__ import annotations

import time

import pytest
from redis import Redis

from tests.cluster import (
    assert_batch_done_exactly_once,
    batch_jobs,
    completed_jobs,
    serve_batch,
    wait_for,
)

pytest_plugins = ["tests.cluster", "tests.httpserver"]
pytestmark = pytest.mark.faults

JOBS = 8


def start_mid_batch(cluster, store, http_server):
    """Two workers and a dispatcher, a batch of JOBS files; returns once it is under way."""
    manifest = serve_batch(http_server, JOBS, delay=0.5)
    cluster.worker("worker1")
    cluster.worker("worker2")
    cluster.dispatcher()
    bid = cluster.submit(type="single-file-batch-manifest", payload_url=manifest)
    wait_for(
        "some jobs done, others not",
        lambda: len(batch_jobs(store, bid)) == JOBS and 1 <= completed_jobs(store, bid) < JOBS - 2,
        cluster,
        timeout=90,
    )
    return bid


def assert_survived(cluster, store, bid):
    arks = assert_batch_done_exactly_once(cluster, store, bid, timeout=120)
    assert len(arks) == JOBS
    assert cluster.minted() == JOBS
    for name in ("worker1", "worker2", "dispatcher"):
        assert cluster.proc(name).poll() is None, f"{name} died\n{cluster.logs()}"


def test_redis_flushed_mid_batch(make_cluster, zk_config, store, own_redis, http_server):
    cluster = make_cluster(
        zk_hosts=zk_config.hosts, chroot=zk_config.chroot, redis_url=own_redis.url
    )
    bid = start_mid_batch(cluster, store, http_server)
    Redis.from_url(own_redis.url).flushall()
    assert_survived(cluster, store, bid)


@pytest.mark.slow
def test_redis_restarted_empty_mid_batch(make_cluster, zk_config, store, own_redis, http_server):
    cluster = make_cluster(
        zk_hosts=zk_config.hosts, chroot=zk_config.chroot, redis_url=own_redis.url
    )
    bid = start_mid_batch(cluster, store, http_server)
    own_redis.kill()
    time.sleep(3)  # an outage, not a blip: the workers and the dispatcher see it
    own_redis.start()
    assert_survived(cluster, store, bid)
