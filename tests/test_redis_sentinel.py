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
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from merritt_queue.dispatcher import ADMIN_QUEUE, all_queue_names

pytest_plugins = ["tests.httpserver"]

REPO = Path(__file__).resolve().parent.parent
MASTER = "mq"
DB = 3  # not 0: shows REDIS_SENTINEL_DB is used

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check, timeout: float = 30.0, logs=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = check()
        except (RedisConnectionError, OSError):
            got = None
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}\n{logs()}")


class Servers:
    """redis-server processes of one test, each with its own directory and log."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}

    def start(self, name: str, *args: str) -> None:
        d = self.root / name
        d.mkdir()
        log = open(d / "out.log", "wb")  # the child keeps its own copy
        self.procs[name] = subprocess.Popen(
            ["redis-server", *args], cwd=d, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def redis(self, name: str, port: int, *extra: str) -> int:
        self.start(
            name,
            "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            *extra,
        )  # fmt: skip
        self.ports[name] = port
        client = Redis(port=port)
        wait_for(f"{name} to answer", client.ping, logs=self.logs)
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
        self.start(name, str(conf), "--sentinel")
        self.ports[name] = port
        client = Redis(port=port)
        wait_for(
            f"{name} to know the master",
            lambda: client.execute_command("SENTINEL", "get-master-addr-by-name", MASTER),
            logs=self.logs,
        )
        return port

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        proc.kill()
        proc.wait(timeout=10)

    def logs(self) -> str:
        out = []
        for name in self.procs:
            path = self.root / name / "out.log"
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-15:]
                out.append(f"--- {name} ---\n" + "\n".join(tail))
        return "\n".join(out)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def servers(tmp_path):
    s = Servers(tmp_path / "redis")
    s.root.mkdir()
    try:
        yield s
    finally:
        s.stop_all()


@pytest.fixture
def sentinel_env(servers, zk_config, tmp_path):
    """A master, a replica and a Sentinel; the environment that points the queue at them."""
    master = servers.redis("master", free_port())
    servers.redis("replica", free_port(), "--replicaof", "127.0.0.1", str(master))
    sentinel = servers.sentinel("sentinel", free_port(), master)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env |= {
        "REDIS_SENTINELS": f"127.0.0.1:{sentinel}",
        "REDIS_SENTINEL_MASTER": MASTER,
        "REDIS_SENTINEL_DB": str(DB),
        "ZK_HOSTS": zk_config.hosts,
        "ZK_CHROOT": zk_config.chroot,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "MQ_WORK_DIR": str(tmp_path / "work"),
        "MQ_STORAGE_ROOT": str(tmp_path / "storage"),
        "MQ_MINTER_DIR": str(tmp_path / "minter"),
        "MQ_ALLOW_LOOPBACK": "true",
        "MQ_SWEEP_SECONDS": "1",
        "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
        "PYTHONUNBUFFERED": "1",
    }
    return env, master


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"manage.py {args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


ENQUEUE = (
    "import django_rq; q = django_rq.get_queue({queue!r}); "
    "print(type(q.connection.connection_pool).__name__); "
    "print(q.enqueue('os.getpid').id)"
)


def enqueue_getpid(env) -> tuple[str, str]:
    """Enqueue ``os.getpid`` on the admin queue from a fresh process: (pool class, job id)."""
    out = manage(env, "shell", "-c", ENQUEUE.format(queue=ADMIN_QUEUE))
    pool, job_id = out.split()[-2:]  # after anything the start-up printed
    return pool, job_id


def run_burst_worker(env) -> None:
    manage(env, "rqworker", "--burst", ADMIN_QUEUE)


def job_result(port: int, job_id: str):
    from rq.job import Job

    return Job.fetch(job_id, connection=Redis(port=port, db=DB))


def test_a_job_enqueued_through_the_sentinel_is_run_by_a_worker(sentinel_env):
    env, master = sentinel_env
    pool, job_id = enqueue_getpid(env)
    assert pool == "SentinelConnectionPool"
    # The job sits on the master the Sentinel named, in REDIS_SENTINEL_DB.
    assert job_result(master, job_id).get_status() == "queued"
    run_burst_worker(env)
    job = job_result(master, job_id)
    assert job.get_status() == "finished"
    assert isinstance(job.return_value(), int)  # the worker process's pid


def test_the_dispatcher_and_workers_run_a_batch_through_the_sentinel(
    sentinel_env, store, http_server, servers
):
    env, master = sentinel_env
    manage(env, "migrate", "--verbosity=0")
    manage(
        env,
        "shell",
        "-c",
        "from batches.models import Profile; "
        "Profile.objects.create(name='s', collection='s', minter_shoulder='ark:/99999/fk4')",
    )
    url = http_server.behave("/one.txt", body=b"through the sentinel\n")
    out = manage(env, "submit", "--profile=s", "--submitter=t", "--type=file", "--payload-url", url)
    bid = out.split()[0]
    procs = []
    try:
        for name, args in (
            ("dispatcher", ["run_dispatcher"]),
            ("worker", ["rqworker", *all_queue_names()]),
        ):
            log = open(servers.root / f"{name}.log", "wb")
            procs.append(
                subprocess.Popen(
                    [sys.executable, "manage.py", *args],
                    cwd=REPO,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            log.close()

        def logs() -> str:
            return "\n".join(
                f"--- {n} ---\n" + (servers.root / f"{n}.log").read_text(errors="replace")[-3000:]
                for n in ("dispatcher", "worker")
            )

        batch = wait_for(
            "the batch to finish",
            lambda: (b := store.get_batch(bid)).status in ("Completed", "Failed") and b,
            timeout=90,
            logs=logs,
        )
        assert batch.status == "Completed", (batch.message, logs())
        # The RQ bookkeeping is on the Sentinel's master, in REDIS_SENTINEL_DB.
        assert any(k.startswith(b"rq:") for k in Redis(port=master, db=DB).keys("rq:*"))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def test_after_a_failover_new_work_goes_to_the_promoted_replica(sentinel_env, servers):
    env, master = sentinel_env
    replica = servers.ports["replica"]
    sentinel = Redis(port=servers.ports["sentinel"])
    wait_for(
        "the replica to be in sync",
        lambda: Redis(port=replica).info("replication").get("master_link_status") == "up",
    )
    wait_for(
        "the Sentinel to know the replica",
        lambda: sentinel.execute_command("SENTINEL", "replicas", MASTER),
        timeout=30,
        logs=servers.logs,
    )
    servers.kill("master")
    wait_for(
        "the Sentinel to promote the replica",
        lambda: (
            int(sentinel.execute_command("SENTINEL", "get-master-addr-by-name", MASTER)[1])
            == replica
        ),
        timeout=60,
        logs=servers.logs,
    )
    _, job_id = enqueue_getpid(env)
    run_burst_worker(env)
    assert job_result(replica, job_id).get_status() == "finished"
