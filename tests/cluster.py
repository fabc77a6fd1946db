"""Real queue processes for the kill and fault tests, and servers a test owns.

A ``Cluster`` (``harness.procs.Procs`` with a database) runs ``manage.py rqworker`` workers
and ``manage.py run_dispatcher`` as separate processes on one ZooKeeper chroot, one Redis
and one file SQLite database that the test reads with ``sqlite3`` (pytest-django's test
database is not used). ZooKeeper sessions are short (``ZK_TIMEOUT=2``) so a killed
worker's job lock vanishes fast, and the dispatcher's ``MQ_STARTED_GRACE_SECONDS=3``
re-enqueues the RQ job a dead worker had started.

``OwnZooKeeper``, ``OwnEnsemble`` and ``OwnRedis`` are servers started by
``scripts/services.sh`` for one test only, so a test may stop, kill or flush them without
touching the suite's shared ZooKeeper and Redis.

Use it as a plugin: ``pytest_plugins = ["tests.cluster", "tests.httpserver"]``.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kazoo.handlers.threading import KazooTimeoutError

from harness.procs import Procs, wait_for
from harness.services import free_port, services
from harness.zookeeper import four_letter
from merritt_queue.core.store import QueueStore
from merritt_queue.core.zk import ZkConfig, connect
from merritt_queue.services.minter import LocalMinter
from merritt_queue.services.storage import LocalStorage
from tests.procs import TEST_SECRET_KEY, queue_env

SHOULDER = "ark:/99999/fk4"
PROFILE = "kill"
FINAL_BATCH = ("Completed", "Failed", "Deleted")


@dataclass
class Cluster(Procs):
    """Worker and dispatcher subprocesses on one chroot, Redis, working dir and database."""

    db: Path = field(kw_only=True)

    @property
    def storage_root(self) -> Path:
        return self.root / "storage"

    def set_up_database(self) -> None:
        """Migrate the database and add the ``kill`` profile (which lives only there)."""
        self.manage("migrate", "--verbosity=0")
        self.manage(
            "shell",
            "-c",
            "from batches.models import Profile; "
            f"Profile.objects.create(name='{PROFILE}', collection='kill', "
            f"minter_shoulder='{SHOULDER}', owner_ark='ark:/99999/fk4owner')",
        )

    def submit(self, **fields: str) -> str:
        args = [f"--{k.replace('_', '-')}={v}" for k, v in fields.items()]
        return self.manage("submit", f"--profile={PROFILE}", "--submitter=tester", *args).split()[0]

    def sql(self, query: str, *params) -> list[tuple]:
        with sqlite3.connect(self.db, timeout=30) as conn:
            return conn.execute(query, params).fetchall()

    def inventory_versions(self, ark: str) -> list[tuple[int, str]]:
        return self.sql(
            "SELECT v.number, v.job_id FROM inventory_inventoryversion v "
            "JOIN inventory_inventoryobject o ON o.id = v.obj_id WHERE o.ark = ?",
            ark,
        )

    def minted(self) -> int:
        """How many ARKs the local minter handed out."""
        counter = self.root / "minter" / "99999-fk4.counter"
        return int(counter.read_text().strip()) if counter.exists() else 0


def cluster_env(root: Path, db: Path, *, zk_hosts: str, chroot: str, redis_url: str) -> dict:
    return queue_env(
        root,
        database_url=f"sqlite:///{db}",
        zk_hosts=zk_hosts,
        chroot=chroot,
        redis_url=redis_url,
        ZK_TIMEOUT="2",
        MQ_STARTED_GRACE_SECONDS="3",
        MQ_PROVISION_RETRY_SECONDS="1",
        MQ_FETCH_TIMEOUT="60",
    )


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory) -> Path:
    """A migrated SQLite file with the ``kill`` profile, copied by each test."""
    root = tmp_path_factory.mktemp("cluster-db")
    db = root / "template.sqlite3"
    env = os.environ | {
        "DATABASE_URL": f"sqlite:///{db}",
        "MQ_WORK_DIR": str(root / "work"),
        "SECRET_KEY": TEST_SECRET_KEY,
    }
    Cluster(env, root, db=db).set_up_database()
    return db


@pytest.fixture
def make_cluster(tmp_path, migrated_db):
    """``make(zk_hosts=..., chroot=..., redis_url=...)``: a cluster on servers of the test's
    choosing, with a fresh copy of the migrated database; its processes end with the test."""
    made: list[Cluster] = []

    def make(*, zk_hosts: str, chroot: str, redis_url: str, name: str = "queue") -> Cluster:
        root = tmp_path / name
        root.mkdir()
        db = root / "db.sqlite3"
        db.write_bytes(migrated_db.read_bytes())
        env = cluster_env(root, db, zk_hosts=zk_hosts, chroot=chroot, redis_url=redis_url)
        made.append(Cluster(env, root, db=db))
        return made[-1]

    yield make
    for c in made:
        c.stop_all()


@pytest.fixture
def cluster(zk_config, redis, make_cluster) -> Cluster:
    """A cluster on the suite's ZooKeeper (the test's chroot) and Redis."""
    return make_cluster(
        zk_hosts=zk_config.hosts, chroot=zk_config.chroot, redis_url=os.environ["REDIS_URL"]
    )


# --- waiting and checking ------------------------------------------------------


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL


def batch_jobs(store: QueueStore, bid: str) -> list[str]:
    return sorted(j for group in store.batches.batch_jobs(bid).values() for j in group)


def only_job(store: QueueStore, bid: str):
    jids = batch_jobs(store, bid)
    return store.jobs.get_job(jids[0]) if len(jids) == 1 else None


def first_arks(tmp_path: Path, n: int = 1) -> list[str]:
    """The ARKs a fresh local minter hands out first, in order."""
    minter = LocalMinter(tmp_path / f"fresh-minter-{uuid.uuid4().hex}")
    return [minter.mint(SHOULDER) for _ in range(n)]


def first_ark(tmp_path: Path) -> str:
    return first_arks(tmp_path)[0]


def wait_final(cluster: Cluster, store: QueueStore, bid: str, timeout: float = 60):
    return wait_for(
        f"batch {bid} to finish",
        lambda: (b := store.batches.get_batch(bid)).status in FINAL_BATCH and b,
        cluster,
        timeout=timeout,
    )


def assert_batch_done_exactly_once(
    cluster: Cluster, store: QueueStore, bid: str, timeout: float = 60
) -> dict[str, str]:
    """The batch completed; each job has its own ARK, one stored version and one inventory
    row, and no lock is left. Returns {jid: ark}."""
    batch = wait_final(cluster, store, bid, timeout)
    jobs = [store.jobs.get_job(j) for j in batch_jobs(store, bid)]
    messages = {j.jid: (j.status, j.message) for j in jobs}
    assert batch.status == "Completed", (batch.message, messages, cluster.logs())
    assert sorted(batch.status_report["successful_jobs"]) == [j.jid for j in jobs]
    storage = LocalStorage(cluster.storage_root)
    arks = {}
    for job in jobs:
        assert job.status == "Completed" and not job.locked, messages
        assert job.retry_count == 0  # re-run by the queue itself, not resumed by a librarian
        ark = job.identifiers["primary_id"]
        arks[job.jid] = ark
        assert storage.versions(ark) == [1], (job.jid, ark)
        assert storage.get_version(ark, 1).token == job.jid
        assert cluster.inventory_versions(ark) == [(1, job.jid)]
    assert len(set(arks.values())) == len(jobs)
    assert [path for path, _ in store.locks.nodes()] == []
    # Each ARK is saved with its job, so the minter keeps no token of a finished job.
    assert list((cluster.root / "minter").glob("*.tokens/*")) == []
    return arks


# --- servers a test owns -----------------------------------------------------------


def zk_mode(port: int) -> str:
    """A ZooKeeper server's ``Mode:`` (leader, follower, standalone), or "" when it does not
    answer."""
    try:
        answer = four_letter(f"127.0.0.1:{port}", "srvr", timeout=2)
    except OSError:
        return ""
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return ""


def start_client(hosts: str, chroot: str = "", timeout: float = 10, patience: float = 90):
    """A started client on a server the test has just started.

    A fresh JVM on a busy machine has been seen to leave a session's first ConnectRequest
    unanswered for longer than the session timeout (CI, 2026-11-22), so a start that times
    out is tried again until ``patience`` runs out, instead of failing the test.
    """
    return wait_for(
        f"a ZooKeeper session on {hosts}",
        lambda: connect(ZkConfig(hosts=hosts, chroot=chroot, timeout=timeout)),
        timeout=patience,
        ignoring=(KazooTimeoutError,),
    )


def wait_for_session(hosts: str) -> None:
    """Return once ``hosts`` has served a whole session, so the test's own clients and
    processes meet a warm server."""
    client = start_client(hosts)
    client.stop()
    client.close()


class _OwnServer:
    """A server of the test's own, on a fixed port across restarts, started and stopped by
    ``services.sh <kind>-start`` and ``<kind>-stop``."""

    kind: str

    def __init__(self, root: Path) -> None:
        self.dir = root
        self.port = free_port()

    def start(self) -> None:
        services(f"{self.kind}-start", str(self.dir), str(self.port))

    def stop(self) -> None:
        services(f"{self.kind}-stop", str(self.dir))


class OwnZooKeeper(_OwnServer):
    """A standalone ZooKeeper."""

    kind = "zk"

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        super().start()
        wait_for_session(self.hosts)


class OwnEnsemble:
    """Three ZooKeeper servers in one ensemble on loopback (``services.sh zk-ensemble-*``)."""

    def __init__(self, root: Path) -> None:
        self.dir = root

    def start(self) -> None:
        self.hosts = services("zk-ensemble-start", str(self.dir), timeout=180)
        self.ports = [int(h.rsplit(":", 1)[1]) for h in self.hosts.split(",")]
        wait_for_session(self.hosts)

    def stop(self) -> None:
        services("zk-ensemble-stop", str(self.dir))

    def mode(self, node: int) -> str:
        return zk_mode(self.ports[node - 1])

    def leader(self) -> int:
        leaders = [n for n in (1, 2, 3) if self.mode(n) == "leader"]
        assert len(leaders) == 1, [self.mode(n) for n in (1, 2, 3)]
        return leaders[0]

    def kill(self, node: int) -> None:
        pid = int((self.dir / f"node{node}" / "zookeeper.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        wait_for(f"ZooKeeper node {node} to die", lambda: not _alive(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by init) counts as dead.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


class OwnRedis(_OwnServer):
    """A redis-server."""

    kind = "redis"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def kill(self) -> None:
        pid = int((self.dir / "redis.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        wait_for("redis-server to die", lambda: not _alive(pid))


def _running(server):
    """Start ``server`` for the test and stop it afterwards, also when its start failed
    halfway (a stop of what never started is a no-op in ``services.sh``)."""
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_zookeeper(tmp_path):
    yield from _running(OwnZooKeeper(tmp_path / "own-zookeeper"))


@pytest.fixture
def own_ensemble(tmp_path):
    yield from _running(OwnEnsemble(tmp_path / "own-ensemble"))


@pytest.fixture
def own_redis(tmp_path):
    yield from _running(OwnRedis(tmp_path / "own-redis"))


@pytest.fixture
def own_store():
    """``make(hosts, chroot)``: a store of the test's own on a server it owns."""
    clients = []

    def make(hosts: str, chroot: str, timeout: float = 10) -> QueueStore:
        client = start_client(hosts, chroot, timeout)
        clients.append(client)
        store = QueueStore(client)
        store.init()
        return store

    yield make
    for client in clients:
        try:
            client.stop()
            client.close()
        except Exception:  # the server may be gone with the test
            pass


# --- content ---------------------------------------------------------------------


def serve_batch(http_server, n: int, size: int = 256 << 10, delay: float = 0.0):
    """A single-file batch manifest of ``n`` random files on ``http_server``, each GET delayed
    by ``delay`` seconds (so a batch is still mid-flight when a test breaks something).
    Returns the manifest's URL."""
    lines = [
        "#%checkm_0.7",
        "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest",
        "#%prefix | mrt: | http://merritt.cdlib.org/terms#",
        "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#",
        "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize "
        "| nfo:fileLastModified | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier "
        "| mrt:creator | mrt:title | mrt:date",
    ]
    for i in range(n):
        data = os.urandom(size)
        name = f"file{i:03d}.bin"
        url = http_server.behave(f"/{name}", body=data, delay=delay)
        md5 = hashlib.md5(data).hexdigest()
        lines.append(f"{url} | md5 | {md5} | {size} |  | {name} |  |  | tester | {name} | 2024")
    lines.append("#%eof")
    (http_server.root / "batch.checkm").write_text("\n".join(lines) + "\n")
    return http_server.url_for("/batch.checkm")


def completed_jobs(store: QueueStore, bid: str) -> int:
    return len(store.batches.batch_jobs(bid).get("batch-completed", []))


def wait_mid_batch(cluster: Cluster, store: QueueStore, bid: str, n: int) -> None:
    """Until the batch of ``n`` jobs has them all, one or more done and three or more not:
    a fault that strikes then finds work both behind and ahead of it."""
    wait_for(
        f"batch {bid} mid-flight: some jobs done, others not",
        lambda: len(batch_jobs(store, bid)) == n and 1 <= completed_jobs(store, bid) < n - 2,
        cluster,
        timeout=90,
    )


def start_mid_batch(cluster: Cluster, store: QueueStore, http_server, n: int) -> str:
    """Two workers and a dispatcher, a batch of ``n`` slow files; its id once it is under way."""
    manifest = serve_batch(http_server, n, delay=0.5)
    cluster.worker("worker1")
    cluster.worker("worker2")
    cluster.dispatcher()
    bid = cluster.submit(type="single-file-batch-manifest", payload_url=manifest)
    wait_mid_batch(cluster, store, bid, n)
    return bid


def assert_survived(cluster: Cluster, store: QueueStore, bid: str, n: int) -> None:
    """The batch of ``start_mid_batch`` was done exactly once, and no process died for it."""
    arks = assert_batch_done_exactly_once(cluster, store, bid, timeout=120)
    assert len(arks) == n
    assert cluster.minted() == n
    for name in ("worker1", "worker2", "dispatcher"):
        assert cluster.proc(name).poll() is None, f"{name} died\n{cluster.logs()}"
