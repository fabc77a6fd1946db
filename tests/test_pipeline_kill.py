"""A worker SIGKILLed mid-step: the job is re-run elsewhere and done exactly once.

Real separate processes: ``manage.py rqworker`` workers and ``manage.py run_dispatcher``,
on the test's ZooKeeper chroot and Redis, sharing a file SQLite database with the test (the
test reads it with ``sqlite3``; pytest-django's test database is not used). ZooKeeper
sessions are short (``ZK_TIMEOUT=2``) so a killed worker's job lock vanishes fast, and the
dispatcher's ``MQ_STARTED_GRACE_SECONDS=3`` re-enqueues the RQ job the dead worker had
started.

Two seams hold a worker inside a step while the test kills it:

- Downloading: the content server sends half the payload, then stalls (first request only).
- Storing: the test holds the per-ARK ``flock`` that ``LocalStorage`` takes right before it
  publishes a version (what a second writer of the same ARK on this host would do), so the
  worker has copied every file and holds the job lock and the ARK's storage lock when killed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from merritt_queue.services.minter import LocalMinter
from merritt_queue.services.storage import LocalStorage, escape_ark
from merritt_queue.tree import storage_lock
from tests.procs import Procs, wait_for

pytest_plugins = ["tests.httpserver"]

SHOULDER = "ark:/99999/fk4"


class Cluster(Procs):
    """Worker and dispatcher subprocesses on one chroot, Redis, working dir and database."""

    def __init__(self, env: dict[str, str], root: Path, db: Path) -> None:
        super().__init__(env, root)
        self.db = db

    @property
    def storage_root(self) -> Path:
        return self.root / "storage"

    def submit(self, **fields: str) -> str:
        args = [f"--{k.replace('_', '-')}={v}" for k, v in fields.items()]
        return self.manage("submit", "--profile=kill", "--submitter=tester", *args).split()[0]

    def inventory_versions(self, ark: str) -> list[tuple[int, str]]:
        with sqlite3.connect(self.db) as conn:
            return conn.execute(
                "SELECT v.number, v.job_id FROM inventory_inventoryversion v "
                "JOIN inventory_inventoryobject o ON o.id = v.obj_id WHERE o.ark = ?",
                (ark,),
            ).fetchall()


@pytest.fixture(scope="module")
def migrated_db(tmp_path_factory) -> Path:
    """A migrated SQLite file with the ``kill`` profile, copied by each test."""
    root = tmp_path_factory.mktemp("kill-db")
    db = root / "template.sqlite3"
    env = os.environ | {"DATABASE_URL": f"sqlite:///{db}", "MQ_WORK_DIR": str(root / "work")}
    cluster = Cluster(env, root, db)
    cluster.manage("migrate", "--verbosity=0")
    cluster.manage(
        "shell",
        "-c",
        "from batches.models import Profile; "
        f"Profile.objects.create(name='kill', collection='kill', minter_shoulder='{SHOULDER}')",
    )
    return db


@pytest.fixture
def cluster(zk_config, redis, tmp_path, migrated_db):
    root = tmp_path / "queue"
    root.mkdir()
    db = root / "db.sqlite3"
    db.write_bytes(migrated_db.read_bytes())
    env = os.environ | {
        "ZK_HOSTS": zk_config.hosts,
        "ZK_CHROOT": zk_config.chroot,
        "ZK_TIMEOUT": "2",
        "REDIS_URL": os.environ["REDIS_URL"],
        "DATABASE_URL": f"sqlite:///{db}",
        "MQ_WORK_DIR": str(root / "work"),
        "MQ_STORAGE_ROOT": str(root / "storage"),
        "MQ_MINTER_DIR": str(root / "minter"),
        "MQ_ALLOW_LOOPBACK": "true",
        "MQ_SWEEP_SECONDS": "1",
        "MQ_STARTED_GRACE_SECONDS": "3",
        "MQ_PROVISION_RETRY_SECONDS": "1",
        "MQ_FETCH_TIMEOUT": "60",
        "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
        "PYTHONUNBUFFERED": "1",
    }
    c = Cluster(env, root, db)
    try:
        yield c
    finally:
        c.stop_all()


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL


def only_job(store, bid: str):
    jids = [j for group in store.batch_jobs(bid).values() for j in group]
    return store.get_job(jids[0]) if len(jids) == 1 else None


def first_ark(tmp_path) -> str:
    """The ARK a fresh local minter hands out first: the one the job must get, and only it."""
    return LocalMinter(tmp_path / "fresh-minter").mint(SHOULDER)


def assert_done_exactly_once(
    cluster: Cluster, store, bid: str, ark: str, name: str, md5: str
) -> None:
    batch = wait_for(
        "the batch to complete",
        lambda: (b := store.get_batch(bid)).status in ("Completed", "Failed") and b,
        cluster,
        timeout=40,
    )
    job = only_job(store, bid)
    assert batch.status == "Completed", (batch.message, job.message, cluster.logs())
    assert job.status == "Completed" and not job.locked
    assert job.retry_count == 0  # re-run by the queue itself, not resumed by a librarian
    assert batch.status_report["successful_jobs"] == [job.jid]
    # One ARK: the minter's counter moved once and the job kept that ARK.
    assert job.identifiers == {"primary_id": ark, "local_id": []}
    assert (cluster.root / "minter" / "99999-fk4.counter").read_text().strip() == "1"
    # One stored version, the job's, with the depositor's bytes.
    storage = LocalStorage(cluster.storage_root)
    assert storage.versions(ark) == [1]
    version = storage.get_version(ark, 1)
    assert version.token == job.jid
    stored = {f.name: f.digests["md5"] for f in version.files}
    assert stored[f"producer/{name}"] == md5
    assert sorted(stored) == [f"producer/{name}", "system/mrt-dc.xml", "system/mrt-erc.txt"]
    assert cluster.inventory_versions(ark) == [(1, job.jid)]
    # No lock left behind: job, storage, inventory and local-id locks are all gone.
    assert [path for path, _ in store.locks()] == []


def test_a_worker_killed_mid_download_is_replaced_and_the_job_is_done_once(
    cluster, store, http_server, tmp_path
):
    data = os.urandom(4 << 20)
    md5 = hashlib.md5(data).hexdigest()
    gets = []

    def chunks():
        gets.append(time.monotonic())
        yield data[: len(data) // 2]
        if len(gets) == 1:  # the first download stalls half way, until the test ends
            http_server.stopping.wait(60)
        yield data[len(data) // 2 :]

    url = http_server.behave("/slow.bin", generate=(len(data), chunks))
    first = cluster.worker("worker1")
    cluster.dispatcher()
    ark = first_ark(tmp_path)
    bid = cluster.submit(type="file", payload_url=url, digest_type="md5", digest_value=md5)

    job = wait_for(
        "the job to be downloading",
        lambda: (
            gets and (j := only_job(store, bid)) and j.status == "Downloading" and j.locked and j
        ),
        cluster,
    )
    part = cluster.root / "work" / "jobs" / job.jid / "producer" / "slow.bin.part"
    wait_for("half the payload on disk", lambda: part.exists() and part.stat().st_size, cluster)
    kill(first)
    assert store.get_job(job.jid).status == "Downloading"  # nothing committed by the dead worker

    cluster.worker("worker2")
    assert_done_exactly_once(cluster, store, bid, ark, "slow.bin", md5)
    assert len(gets) == 2  # the killed download, then one complete download


def test_a_worker_killed_mid_storing_is_replaced_and_one_version_is_stored(
    cluster, store, http_server, tmp_path
):
    data = os.urandom(1 << 20)
    md5 = hashlib.md5(data).hexdigest()
    url = http_server.behave("/object.bin", body=data)
    ark = first_ark(tmp_path)
    lock_dir = cluster.storage_root / ".locks"
    lock_dir.mkdir(parents=True)
    holder = open(lock_dir / f"{escape_ark(ark)}.lock", "a")  # closed below, after the kill
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        first = cluster.worker("worker1")
        cluster.dispatcher()
        bid = cluster.submit(type="file", payload_url=url)
        job = wait_for(
            "the job to be storing",
            lambda: (j := only_job(store, bid)) and j.status == "Storing" and j.locked and j,
            cluster,
        )
        built = cluster.storage_root / ".tmp"
        wait_for(
            "the version to be copied, waiting to be published",
            lambda: any(built.glob("*/manifest.json")),
            cluster,
        )
        kill(first)
    finally:
        holder.close()
    assert store.get_job(job.jid).status == "Storing"
    # The dead worker leaves the ARK's persistent storage lock; the job's rerun takes it back.
    assert [p for p, _ in store.locks()] == [storage_lock(ark)]
    assert LocalStorage(cluster.storage_root).versions(ark) == []

    cluster.worker("worker2")
    assert_done_exactly_once(cluster, store, bid, ark, "object.bin", md5)
