"""A worker SIGKILLed inside each job step: the job is re-run elsewhere and done exactly once.

Real separate processes (``tests.cluster``): ``manage.py rqworker`` workers and
``manage.py run_dispatcher``. Each step has a seam that holds the first worker inside the step,
holding the job's lock, until the test kills it; what would happen in production:

- Estimating: the content server does not answer the first HEAD (size probe).
- Provisioning: nothing inside the step waits on anything, so the first worker runs with a
  full-disk threshold (it keeps deferring) and is killed the moment its lock is seen; a kill
  that lands after the step committed is detected (the lock is gone) and tried again.
- Downloading: the content server sends half the payload, then stalls.
- Processing: the test holds the local minter's counter ``flock`` (a second minter on this host).
- Storing: the test holds the per-ARK ``flock`` that ``LocalStorage`` holds while it plans,
  builds and publishes a version (a second writer of the same ARK on this host).
- Recording: the test holds the SQLite write lock (a long write by another process), so the
  inventory insert waits.
- Notify: the depositor's callback does not answer the first notification.

Exactly once: one minted ARK, one stored version, one inventory row, one callback delivered
(a repeated notification carries the same ``Idempotency-Key``), no lock left.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from merritt_queue.core.attempt import STAGING
from merritt_queue.core.history import MAX_MESSAGE
from merritt_queue.core.states import JOB_STEPS
from merritt_queue.core.tree import inventory_lock, job_node, storage_lock
from merritt_queue.services.storage import LocalStorage, escape_ark
from tests.cluster import (
    PROFILE,
    Cluster,
    first_ark,
    kill,
    only_job,
    wait_for,
)
from tests.httpserver import Reply

pytest_plugins = ["tests.cluster", "tests.httpserver"]
pytestmark = pytest.mark.faults

# Downloading and Storing are the quick subset (`PYTEST_MARK="not slow"`).
STEPS = [
    pytest.param(str(s), marks=() if s in ("Downloading", "Storing") else pytest.mark.slow)
    for s in JOB_STEPS
]


class Seams:
    """The content and callback endpoints, and the per-step holds, for one test."""

    def __init__(self, cluster: Cluster, http_server, tmp_path: Path, step: str):
        self.cluster, self.http, self.step = cluster, http_server, step
        self.data = os.urandom(4 << 20 if step == "Downloading" else 1 << 20)
        self.md5 = hashlib.md5(self.data).hexdigest()
        self.ark = first_ark(tmp_path)
        self.heads = 0
        self.gets = 0
        self.callbacks: list[dict] = []
        self.answered = 0
        self.batch_callbacks = 0
        self.released = threading.Event()
        self._held: list = []  # files and connections that hold a lock until release()
        if step == "Downloading":
            size = len(self.data)
            http_server.behave("/object.bin", generate=(size, self._chunks))
        else:
            http_server.behave("/object.bin", handler=self._content)
        http_server.behave("/callback", handler=self._callback)
        cluster.sql(
            "UPDATE batches_profile SET callback_url = ? WHERE name = ?",
            http_server.url_for("/callback"),
            PROFILE,
        )

    def _wait(self) -> None:
        while not (self.released.is_set() or self.http.stopping.is_set()):
            self.released.wait(0.1)

    def _content(self, rec) -> Reply:
        if rec.method == "HEAD":
            self.heads += 1
            if self.step == "Estimating" and self.heads == 1:
                self._wait()
            return Reply(200, self.data)
        self.gets += 1
        return Reply(200, self.data)

    def _chunks(self):
        self.gets += 1
        half = len(self.data) // 2
        yield self.data[:half]
        if self.gets == 1:  # the first download stalls half way
            self._wait()
        yield self.data[half:]

    def _callback(self, rec) -> Reply:
        if "job_id" not in json.loads(rec.body):  # the batch's own report
            self.batch_callbacks += 1
            return Reply(200, b"ok")
        self.callbacks.append(rec.headers)
        if self.step == "Notify" and len(self.callbacks) == 1:
            self._wait()
            return Reply(503, b"")
        self.answered += 1
        return Reply(200, b"ok")

    # --- holds taken before the job reaches its step ----------------------------

    def hold_before_submit(self) -> None:
        if self.step == "Processing":
            self._flock(self.cluster.root / "minter" / "99999-fk4.lock")
        elif self.step == "Storing":
            self._flock(self.cluster.storage_root / ".locks" / f"{escape_ark(self.ark)}.lock")

    def hold_after_submit(self) -> None:
        if self.step == "Recording":
            conn = sqlite3.connect(self.cluster.db, timeout=30, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            self._held.append(conn)

    def _flock(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a")
        fcntl.flock(f, fcntl.LOCK_EX)
        self._held.append(f)

    def release(self) -> None:
        self.released.set()
        for held in self._held:
            held.close()  # an open SQLite transaction is rolled back
        self._held.clear()

    # --- the worker is inside the step ------------------------------------------

    def inside(self, store, job) -> bool:
        """True once the worker holding the job's lock is waiting on this step's seam."""
        if job.status != self.step or not job.locked:
            return False
        root = self.cluster.root
        if self.step == "Estimating":
            return self.heads >= 1
        if self.step == "Downloading":
            # Written in the attempt's own staging folder (docs/architecture.md, Fencing).
            staged = root / "work" / "jobs" / job.jid / STAGING
            return any(_size(p) > 0 for p in staged.glob("*/producer/object.bin.part"))
        if self.step == "Processing":
            return _has_open(self.cluster.proc("worker1").pid, root / "minter" / "99999-fk4.lock")
        if self.step == "Storing":
            lock = self.cluster.storage_root / ".locks" / f"{escape_ark(self.ark)}.lock"
            return _has_open(self.cluster.proc("worker1").pid, lock)
        if self.step == "Recording":
            return store.client.exists(inventory_lock(self.ark)) is not None
        if self.step == "Notify":
            return len(self.callbacks) >= 1
        raise AssertionError(self.step)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # the attempt ended meanwhile
        return 0


def _has_open(pid: int, path: Path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.path.realpath(fd) == str(path.resolve()) for fd in fds.iterdir())
    except FileNotFoundError:  # the process is gone
        return False


def kill_inside(cluster: Cluster, store, bid: str, seams: Seams):
    """Kill worker1 while it holds the job's lock inside the step; the job as left behind."""
    proc = cluster.proc("worker1")
    job = wait_for(
        f"the worker to be inside {seams.step}",
        lambda: (j := only_job(store, bid)) and seams.inside(store, j) and j,
        cluster,
        timeout=60,
    )
    time.sleep(0.3)  # let it settle into the wait (e.g. the blocking flock call)
    kill(proc)
    return job


def kill_in_provisioning(cluster: Cluster, store, bid: str) -> object:
    """Provisioning has nothing to hold: poll the lock fast and kill the moment it is taken.

    Tried again with a fresh full-disk worker when the kill came after the commit.
    """
    full_disk = {"MQ_DISK_THRESHOLD": "1"}
    for _ in range(12):
        proc = cluster.proc("worker1")
        job = wait_for(
            "the job to wait in Provisioning",
            lambda: (j := only_job(store, bid)) and j.status == "Provisioning" and j,
            cluster,
            timeout=60,
        )
        lock = job_node(job.jid, "lock")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not store.client.exists(lock):
            time.sleep(0.001)
        kill(proc)
        if store.client.exists(lock):
            return store.jobs.get_job(job.jid)
        cluster.worker("worker1", **full_disk)
    raise AssertionError(f"never caught the worker inside Provisioning\n{cluster.logs()}")


@pytest.mark.parametrize("step", STEPS)
def test_a_worker_killed_inside_a_step_is_replaced_and_the_job_is_done_once(
    step, cluster, store, http_server, tmp_path
):
    seams = Seams(cluster, http_server, tmp_path, step)
    try:
        seams.hold_before_submit()
        if step == "Provisioning":
            cluster.worker("worker1", MQ_DISK_THRESHOLD="1")
        elif step != "Recording":  # Recording's starts once the test holds the database
            cluster.worker("worker1")
        cluster.dispatcher()
        cluster.start("follower", "manage.py", "reconcile", "--watch")
        url = http_server.url_for("/object.bin")
        bid = cluster.submit(
            type="file", payload_url=url, digest_type="md5", digest_value=seams.md5
        )
        seams.hold_after_submit()
        if step == "Recording":
            # Only now: a worker already running may carry the job through Recording before
            # the test holds the lock. Its mirror writes would wait on the test's SQLite
            # lock; its inventory write must.
            cluster.worker("worker1", MQ_MIRROR_WRITE_THROUGH="false")
        if step == "Provisioning":
            job = kill_in_provisioning(cluster, store, bid)
        else:
            job = kill_inside(cluster, store, bid, seams)
    finally:
        seams.release()
    # Nothing committed by the dead worker; its ephemeral lock outlives it by the session
    # timeout, so the replacement waits for ZooKeeper to notice the death.
    left = store.jobs.get_job(job.jid)
    assert left.status == step and left.locked, (left, cluster.logs())
    if step == "Storing":
        assert [p for p, _ in store.locks.nodes()] == [storage_lock(seams.ark)]
        assert LocalStorage(cluster.storage_root).versions(seams.ark) == []
    if step == "Recording":
        assert cluster.inventory_versions(seams.ark) == []

    cluster.worker("worker2")
    assert_done_exactly_once(cluster, store, bid, seams)
    expected_gets = 2 if step == "Downloading" else 1  # the killed download, then a whole one
    assert seams.gets == expected_gets


def assert_done_exactly_once(cluster: Cluster, store, bid: str, seams: Seams) -> None:
    batch = wait_for(
        "the batch to complete",
        lambda: (b := store.batches.get_batch(bid)).status in ("Completed", "Failed") and b,
        cluster,
        timeout=60,
    )
    job = only_job(store, bid)
    assert batch.status == "Completed", (batch.message, job.message, cluster.logs())
    assert job.status == "Completed" and not job.locked
    assert job.retry_count == 0  # re-run by the queue itself, not resumed by a librarian
    assert batch.status_report["successful_jobs"] == [job.jid]
    # One ARK: the minter's counter moved once and the job kept that ARK.
    assert job.identifiers == {"primary_id": seams.ark, "local_id": []}
    assert cluster.minted() == 1
    # One stored version, the job's, with the depositor's bytes.
    storage = LocalStorage(cluster.storage_root)
    assert storage.versions(seams.ark) == [1]
    version = storage.get_version(seams.ark, 1)
    assert version.token == job.jid
    stored = {f.name: f.digests["md5"] for f in version.files}
    assert stored["producer/object.bin"] == seams.md5
    assert sorted(stored) == ["producer/object.bin", "system/mrt-dc.xml", "system/mrt-erc.txt"]
    assert cluster.inventory_versions(seams.ark) == [(1, job.jid)]
    # One callback delivered; a repeated one (Notify killed) has the same idempotency key.
    assert seams.answered == 1, (seams.callbacks, cluster.logs())
    assert {h["idempotency-key"] for h in seams.callbacks} == {f"{job.jid}:notify"}
    assert len(seams.callbacks) == (2 if seams.step == "Notify" else 1)
    assert seams.batch_callbacks == 1
    # No lock left behind: job, storage, inventory and local-id locks are all gone.
    assert [path for path, _ in store.locks.nodes()] == []
    assert_timeline_is_zookeepers(cluster, job)


def assert_timeline_is_zookeepers(cluster: Cluster, job) -> None:
    """The job's timeline in the mirror (the killed worker's held-back write-through lost,
    the follower and the replacement racing) is its history node, version for version."""
    entries = [
        (e.version, e.from_status, e.to_status, e.message[:MAX_MESSAGE], e.retry_count, e.by)
        for e in job.history.entries
    ]
    assert [e[0] for e in entries] == list(range(job.status_version + 1))
    query = (
        "SELECT status_version, from_status, to_status, message, retry_count, actor, exact "
        "FROM jobs_jobevent WHERE jid = ? ORDER BY status_version"
    )
    rows = wait_for(
        "the mirror's timeline to reach the job's last version",
        lambda: (r := cluster.sql(query, job.jid)) and r[-1][0] == job.status_version and r,
        cluster,
        timeout=30,
    )
    assert [r[:6] for r in rows] == entries and all(r[6] for r in rows), cluster.logs()
