"""ZooKeeper goes away mid-batch: stopped for 30 s, its leader killed, a worker's session lost.

Each test runs its own ZooKeeper (``services.sh zk-start`` or ``zk-ensemble-start``) with its
own workers and dispatcher, so the suite's shared ZooKeeper is never stopped.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from merritt_queue.core.tree import job_node
from tests.cluster import (
    assert_batch_done_exactly_once,
    assert_survived,
    first_ark,
    only_job,
    start_mid_batch,
    wait_for,
)

pytest_plugins = ["tests.cluster", "tests.httpserver"]
pytestmark = pytest.mark.faults

JOBS = 8
CHROOT = "/mq-faults"


def mid_batch(make_cluster, own_store, hosts: str, http_server):
    """A cluster and a store on the test's own ZooKeeper ``hosts``, a batch under way on it:
    (cluster, store, batch id)."""
    cluster = make_cluster(zk_hosts=hosts, chroot=CHROOT, redis_url=os.environ["REDIS_URL"])
    store = own_store(hosts, CHROOT)
    return cluster, store, start_mid_batch(cluster, store, http_server, JOBS)


@pytest.mark.slow
def test_zookeeper_stopped_for_30_seconds_mid_batch(
    make_cluster, redis, own_zookeeper, own_store, http_server
):
    cluster, store, bid = mid_batch(make_cluster, own_store, own_zookeeper.hosts, http_server)
    own_zookeeper.stop()
    time.sleep(30)
    own_zookeeper.start()
    assert_survived(cluster, store, bid, JOBS)


@pytest.mark.slow
def test_zookeeper_leader_killed_mid_batch(
    make_cluster, redis, own_ensemble, own_store, http_server
):
    cluster, store, bid = mid_batch(make_cluster, own_store, own_ensemble.hosts, http_server)
    leader = own_ensemble.leader()
    own_ensemble.kill(leader)
    survivors = [n for n in (1, 2, 3) if n != leader]
    wait_for(
        "the other two to elect a leader",
        lambda: sorted(own_ensemble.mode(n) for n in survivors) == ["follower", "leader"],
        cluster,
        timeout=60,
    )
    assert_survived(cluster, store, bid, JOBS)


def test_a_worker_whose_session_expires_inside_a_step_commits_nothing(
    cluster, store, http_server, tmp_path
):
    """A worker frozen (SIGSTOP: a long GC pause, a suspended VM) past its session timeout
    loses its lock; another worker does the job; the frozen one, thawed, commits nothing."""
    data = os.urandom(1 << 20)
    gets = []
    thaw = []

    def chunks():
        gets.append(1)
        yield data[: len(data) // 2]
        if len(gets) == 1:  # the first download stalls until the worker is thawed
            wait_for("the thaw", lambda: thaw or http_server.stopping.is_set(), timeout=120)
        yield data[len(data) // 2 :]

    url = http_server.behave("/object.bin", generate=(len(data), chunks))
    ark = first_ark(tmp_path)
    frozen = cluster.worker("worker1")
    cluster.dispatcher()
    bid = cluster.submit(type="file", payload_url=url)
    job = wait_for(
        "the job to be downloading",
        lambda: gets and (j := only_job(store, bid)) and j.status == "Downloading" and j,
        cluster,
    )
    owner = store.client.exists(job_node(job.jid, "lock")).ephemeralOwner
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        wait_for(
            "the frozen worker's session to expire",
            lambda: not store.client.exists(job_node(job.jid, "lock")),
            cluster,
        )
        cluster.worker("worker2")
        wait_for(
            "another worker to complete the job",
            lambda: store.jobs.get_job(job.jid).status == "Completed",
            cluster,
            timeout=60,
        )
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
        thaw.append(1)
    wait_for(
        "the thawed worker to give the step up",
        lambda: "abandoned" in cluster.log("worker1"),
        cluster,
    )
    done = store.jobs.get_job(job.jid)
    assert done.status == "Completed" and done.identifiers["primary_id"] == ark
    assert frozen.poll() is None, cluster.logs()  # it lives on with a new session
    assert owner != 0
    assert_batch_done_exactly_once(cluster, store, bid)
    assert cluster.minted() == 1
