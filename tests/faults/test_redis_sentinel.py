"""The queue's processes on a Sentinel-managed Redis (REDIS_SENTINELS, REDIS_SENTINEL_MASTER).

Real servers on free 127.0.0.1 ports, started and stopped by the test: a redis-server (the
master), a replica, and one ``redis-server --sentinel`` watching the master under the name
``mq``. The ``manage.py`` processes get the Sentinel's address and no REDIS_URL, so every
connection they make goes through the Sentinel's answer. The test itself reads the master
with a plain client to see where the work landed.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

import pytest
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from harness.procs import Procs, wait_for
from harness.services import free_port
from merritt_queue.core.queues import ADMIN_QUEUE
from tests.procs import queue_env

pytest_plugins = ["tests.httpserver"]

MASTER = "mq"
DB = 3  # not 0: shows REDIS_SENTINEL_DB is used
# A server still starting, or just killed, refuses the connection: that is "not yet".
NOT_YET = (RedisConnectionError, OSError)

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed"
)


@dataclass
class Servers(Procs):
    """redis-server processes of one test, each in a directory of its own."""

    ports: dict[str, int] = field(default_factory=dict)

    def _server(self, name: str, *args: str) -> None:
        d = self.root / name
        d.mkdir()
        self.spawn(name, ["redis-server", *args], cwd=d)

    def redis(self, name: str, port: int, *extra: str) -> int:
        self._server(
            name,
            "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            *extra,
        )  # fmt: skip
        self.ports[name] = port
        client = Redis(port=port)
        wait_for(f"{name} to answer", client.ping, self, ignoring=NOT_YET)
        return port

    def sentinel(self, name: str, port: int, master_port: int) -> int:
        # A Sentinel rewrites its config file, so it gets a file of its own.
        conf = self.root / f"{name}.conf"
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.root}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {master_port} 1\n"
            f"sentinel down-after-milliseconds {MASTER} 1000\n"
            f"sentinel failover-timeout {MASTER} 5000\n"
        )
        self._server(name, str(conf), "--sentinel")
        self.ports[name] = port
        client = Redis(port=port)
        wait_for(
            f"{name} to know the master",
            lambda: client.execute_command("SENTINEL", "get-master-addr-by-name", MASTER),
            self,
            ignoring=NOT_YET,
        )
        return port

    def kill(self, name: str) -> None:
        proc = self.proc(name)
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def servers(tmp_path):
    s = Servers(dict(os.environ), tmp_path / "redis")
    s.root.mkdir()
    try:
        yield s
    finally:
        s.stop_all()


@pytest.fixture
def sentinel_queue(servers, zk_config, tmp_path):
    """A master, a replica and a Sentinel; the queue's processes pointed at them, and the
    master's port."""
    master = servers.redis("master", free_port())
    servers.redis("replica", free_port(), "--replicaof", "127.0.0.1", str(master))
    sentinel = servers.sentinel("sentinel", free_port(), master)
    root = tmp_path / "queue"
    root.mkdir()
    env = queue_env(
        root,
        database_url=f"sqlite:///{root / 'db.sqlite3'}",
        zk_hosts=zk_config.hosts,
        chroot=zk_config.chroot,
        redis_url=None,
        REDIS_SENTINELS=f"127.0.0.1:{sentinel}",
        REDIS_SENTINEL_MASTER=MASTER,
        REDIS_SENTINEL_DB=str(DB),
    )
    q = Procs(env, root)
    try:
        yield q, master
    finally:
        q.stop_all()


ENQUEUE = (
    "import django_rq; q = django_rq.get_queue({queue!r}); "
    "print(type(q.connection.connection_pool).__name__); "
    "print(q.enqueue('os.getpid').id)"
)


def enqueue_getpid(q: Procs) -> tuple[str, str]:
    """Enqueue ``os.getpid`` on the admin queue from a fresh process: (pool class, job id)."""
    out = q.manage("shell", "-c", ENQUEUE.format(queue=ADMIN_QUEUE))
    pool, job_id = out.split()[-2:]  # after anything the start-up printed
    return pool, job_id


def run_burst_worker(q: Procs) -> None:
    q.manage("rqworker", "--burst", ADMIN_QUEUE)


def job_result(port: int, job_id: str):
    from rq.job import Job

    return Job.fetch(job_id, connection=Redis(port=port, db=DB))


def test_a_job_enqueued_through_the_sentinel_is_run_by_a_worker(sentinel_queue):
    q, master = sentinel_queue
    pool, job_id = enqueue_getpid(q)
    assert pool == "SentinelConnectionPool"
    # The job sits on the master the Sentinel named, in REDIS_SENTINEL_DB.
    assert job_result(master, job_id).get_status() == "queued"
    run_burst_worker(q)
    job = job_result(master, job_id)
    assert job.get_status() == "finished"
    assert isinstance(job.return_value(), int)  # the worker process's pid


def test_the_dispatcher_and_workers_run_a_batch_through_the_sentinel(
    sentinel_queue, store, http_server
):
    q, master = sentinel_queue
    q.manage("migrate", "--verbosity=0")
    q.manage(
        "shell",
        "-c",
        "from batches.models import Profile; "
        "Profile.objects.create(name='s', collection='s', minter_shoulder='ark:/99999/fk4')",
    )
    url = http_server.behave("/one.txt", body=b"through the sentinel\n")
    out = q.manage("submit", "--profile=s", "--submitter=t", "--type=file", "--payload-url", url)
    bid = out.split()[0]
    q.dispatcher()
    q.worker("worker")
    batch = wait_for(
        "the batch to finish",
        lambda: (b := store.batches.get_batch(bid)).status in ("Completed", "Failed") and b,
        q,
        timeout=90,
    )
    assert batch.status == "Completed", (batch.message, q.logs())
    # The RQ bookkeeping is on the Sentinel's master, in REDIS_SENTINEL_DB.
    assert any(k.startswith(b"rq:") for k in Redis(port=master, db=DB).keys("rq:*"))


def test_after_a_failover_new_work_goes_to_the_promoted_replica(sentinel_queue, servers):
    q, _ = sentinel_queue
    replica = servers.ports["replica"]
    sentinel = Redis(port=servers.ports["sentinel"])
    wait_for(
        "the replica to be in sync",
        lambda: Redis(port=replica).info("replication").get("master_link_status") == "up",
        servers,
        ignoring=NOT_YET,
    )
    wait_for(
        "the Sentinel to know the replica",
        lambda: sentinel.execute_command("SENTINEL", "replicas", MASTER),
        servers,
        ignoring=NOT_YET,
    )
    servers.kill("master")
    wait_for(
        "the Sentinel to promote the replica",
        lambda: (
            int(sentinel.execute_command("SENTINEL", "get-master-addr-by-name", MASTER)[1])
            == replica
        ),
        servers,
        timeout=60,
        ignoring=NOT_YET,
    )
    _, job_id = enqueue_getpid(q)
    run_burst_worker(q)
    assert job_result(replica, job_id).get_status() == "finished"
