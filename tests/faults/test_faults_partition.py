"""A worker (or the dispatcher) cut off from ZooKeeper while it keeps running (issue 31).

Worker A reaches ZooKeeper through a ``Partition`` proxy (``tests/partition.py``); worker B,
the dispatcher and the test go direct. The test catches A inside a step, blackholes its link
(nothing reset, nothing closed), and waits for ZooKeeper to expire A's session: A's job lock
vanishes and B takes the job, while A, unaware, finishes what it was doing. Once the job is
final the link heals and A, told its session is gone, must write nothing that changes the job.

Where A is caught:

- Downloading: the content server sends the file at 1 MiB/s, so A's download outlives the cut
  (its HTTP link is never cut) and overlaps B's.
- Processing: the project's EZID stand-in (``FakeEzid``) holds A's first read of the ARK it has
  just saved (``describe``) until B has completed the job.
- Between minting and saving the ARK: the test holds the local minter's ``flock`` (another
  minter on the host) until A is cut, so A mints and then cannot save.
- Storing: the test holds ``LocalStorage``'s per-ARK ``flock`` (another writer of the ARK on the
  host) until A is cut, so A stores the version while cut off. A file that would keep Storing
  busy for seconds by itself needs more than a GiB here (200 MB store in 0.5 s).

Every job must end Completed with one download kept (the stored file is the source's bytes,
and the content server sent it whole as often as expected: ``full``), one stored version,
one inventory row, one ARK minted, one callback answered, a history that follows the state
machine, no lock left, and nothing changed by A after the heal.

ZooKeeper sessions are ``ZK_TIMEOUT=2`` (the test server's minimum, 4 s, is what they get).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import time
from pathlib import Path

import pytest
from redis import Redis
from rq import Worker

from merritt_queue.core.states import JOB
from merritt_queue.core.tree import job_node
from merritt_queue.services.storage import LocalStorage, escape_ark
from tests.cluster import PROFILE, Cluster, first_ark, kill, only_job, wait_final, wait_for
from tests.httpserver import FakeEzid, Reply
from tests.partition import Partition

pytest_plugins = ["tests.cluster", "tests.httpserver"]
pytestmark = pytest.mark.faults

MiB = 1 << 20
CHUNK = 64 << 10
# Long enough that A is still downloading when B starts again from the beginning.
SLOW_SIZE, RATE = 12 * MiB, 1 * MiB
SIZE = 4 * MiB
# How long A, healed, is watched for a late write once it has given its step up.
SETTLE = 2.0
# Time enough after the heal for A to be told its session expired (kazoo retries every 2 s).
RECONNECT = 5.0
DISPATCHER_CUT = 25.0


@pytest.fixture
def partition(zk_config):
    """The proxy; tests ask for it before ``cluster``, so it outlives their processes (a
    process whose ZooKeeper refuses it may take long to stop)."""
    proxy = Partition(zk_config.hosts)
    yield proxy
    proxy.close()


class Depositor:
    """The depositor's side on the content server: the file, sent at ``rate`` bytes a second
    (None: at once) to the first ``slow`` GETs (None: to all), and the callback URL, answered
    200."""

    def __init__(
        self,
        cluster: Cluster,
        http_server,
        size: int,
        rate: float | None = None,
        slow: int | None = None,
    ):
        block = os.urandom(MiB)
        self.data = (block * (size // MiB + 1))[:size]
        self.md5 = hashlib.md5(self.data).hexdigest()
        self.http, self.rate, self.slow = http_server, rate, slow
        self.gets = 0  # GETs of the file begun
        self.full = 0  # ... and sent to their last byte
        self.sent = 0  # bytes of the file sent, all GETs together
        self.callbacks: list[dict] = []
        self.url = http_server.behave("/object.bin", generate=(size, self._chunks))
        http_server.behave("/callback", handler=self._callback)
        cluster.sql(
            "UPDATE batches_profile SET callback_url = ? WHERE name = ?",
            http_server.url_for("/callback"),
            PROFILE,
        )

    def _chunks(self):
        self.gets += 1
        rate = self.rate if self.slow is None or self.gets <= self.slow else None
        for start in range(0, len(self.data), CHUNK):
            piece = self.data[start : start + CHUNK]
            yield piece
            self.sent += len(piece)
            if rate and self.http.stopping.wait(len(piece) / rate):
                return
        self.full += 1

    def _callback(self, rec) -> Reply:
        if "job_id" in json.loads(rec.body):  # not the batch's report
            self.callbacks.append(rec.headers)
        return Reply(200, b"ok")

    def submit(self, cluster: Cluster) -> str:
        return cluster.submit(
            type="file", payload_url=self.url, digest_type="md5", digest_value=self.md5
        )


class HeldEzid(FakeEzid):
    """The EZID stand-in, holding its answer to the first mint (``hold="mint"``) or to the
    first read of an identifier (``hold="read"``: Processing's ``describe``) until
    ``release``."""

    def __init__(self, server, hold: str) -> None:
        super().__init__(server)
        self.hold = hold
        self.holding = threading.Event()
        self.released = threading.Event()

    def env(self) -> dict[str, str]:
        return {
            "MQ_MINTER": "ezid",
            "EZID_URL": self.url,
            "EZID_USER": self.username,
            "EZID_PASSWORD": self.password,
        }

    def _wait(self) -> None:
        self.holding.set()
        while not (self.released.wait(0.1) or self.server.stopping.is_set()):
            pass

    def _handle(self, rec) -> Reply:
        reply = super()._handle(rec)
        if self.hold == "mint" and len(self.minted) == 1 and not self.holding.is_set():
            self._wait()
        return reply

    def _handle_id(self, rec) -> Reply:
        if self.hold == "read" and rec.method == "GET" and not self.holding.is_set():
            self._wait()
        return super()._handle_id(rec)


class FileLock:
    """A ``flock`` the test holds on a lock file of the queue's, as another process would."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = open(path, "a")
        fcntl.flock(self.file, fcntl.LOCK_EX)

    def held_by(self, pid: int) -> bool:
        """Whether process ``pid`` has the lock file open (it waits for the lock)."""
        try:
            return any(
                os.path.realpath(fd) == str(self.path.resolve())
                for fd in Path(f"/proc/{pid}/fd").iterdir()
            )
        except FileNotFoundError:
            return False

    def release(self) -> None:
        self.file.close()


class Partitioned:
    """One test's cluster: worker A through the proxy; the dispatcher, B and the test direct."""

    def __init__(self, cluster: Cluster, store, partition: Partition, depositor: Depositor):
        self.cluster, self.store, self.partition, self.depositor = (
            cluster,
            store,
            partition,
            depositor,
        )
        self.times: dict[str, float] = {"start": time.monotonic()}
        self.minted = cluster.minted  # how many ARKs were minted

    def start(self) -> None:
        self.a = self.cluster.worker("worker-a", ZK_HOSTS=self.partition.hosts)
        self.cluster.dispatcher()
        self.bid = self.depositor.submit(self.cluster)

    def wait_inside(self, step: str, inside=lambda job: True):
        """The job once A holds its lock in ``step`` and ``inside(job)``; A's session id."""
        job = wait_for(
            f"worker A inside {step}",
            lambda: (
                (j := only_job(self.store, self.bid))
                and j.status == step
                and j.locked
                and inside(j)
                and j
            ),
            self.cluster,
            timeout=60,
        )
        self.jid = job.jid
        self.a_session = self._lock_owner()
        return job

    def _lock_owner(self) -> int | None:
        stat = self.store.client.exists(job_node(self.jid, "lock"))
        return stat.ephemeralOwner if stat else None

    def start_b(self) -> None:
        """B, started before the cut so that it is ready when the job comes free: until then
        A's lock keeps the job from it."""
        self.b = self.cluster.worker("worker-b")

    def cut(self) -> None:
        self.partition.blackhole()
        self.times["cut"] = time.monotonic()

    def b_takes_over(self, timeout: float = 90):
        """The job once A's session is gone and B has taken it to its end."""
        wait_for(
            "A's session to expire and its job lock to vanish",
            lambda: self._lock_owner() != self.a_session,
            self.cluster,
            timeout=30,
        )
        self.times["expired"] = time.monotonic()
        job = self.wait_final(timeout)
        self.times["final"] = time.monotonic()
        return job

    def wait_final(self, timeout: float = 90):
        """The job once it and its batch (reported after it) are final."""
        job = wait_for(
            f"job {self.jid} to end",
            lambda: (
                (j := self.store.jobs.get_job(self.jid)).status in ("Completed", "Failed") and j
            ),
            self.cluster,
            timeout=timeout,
        )
        wait_final(self.cluster, self.store, self.bid, timeout=30)
        return job

    def heal_and_watch(self) -> None:
        """Heal; once A has given its step up and has had time to reconnect (and do what it
        put off until ZooKeeper answers), nothing has changed."""
        assert self.partition.dropped > 0  # the cut met A's traffic (its pings at least)
        before = self.snapshot()
        self.partition.heal()
        healed = self.times["healed"] = time.monotonic()
        wait_for("worker A to give its step up", self._a_idle, self.cluster, timeout=60)
        time.sleep(max(SETTLE, healed + RECONNECT - time.monotonic()))
        assert self.snapshot() == before, self.cluster.logs()
        assert self.a.poll() is None, self.cluster.logs()  # A lives on with a new session

    def _a_idle(self) -> bool:
        """Whether A's RQ worker says it is idle: its RQ job (the step) has ended."""
        with Redis.from_url(self.cluster.env["REDIS_URL"]) as redis:
            workers = Worker.all(connection=redis)
            return any(w.pid == self.a.pid and w.get_state() == "idle" for w in workers)

    def snapshot(self) -> dict:
        """Everything a late write of A's could change: the job's and batch's nodes (data and
        the transaction that last wrote each), storage, inventory, ARKs, callbacks, GETs."""
        client = self.store.client
        nodes = {}
        for path in (f"/jobs/{self.jid}", f"/batches/{self.bid}"):
            for child in client.get_children(path):
                if child != "lock":
                    data, stat = client.get(f"{path}/{child}")
                    nodes[f"{path}/{child}"] = (data, stat.mzxid)
        job = self.store.jobs.get_job(self.jid)
        ark = (job.identifiers or {}).get("primary_id", "")
        return {
            "nodes": nodes,
            "locks": sorted(p for p, _ in self.store.locks.nodes()),
            "versions": LocalStorage(self.cluster.storage_root).versions(ark) if ark else [],
            "inventory": self.cluster.inventory_versions(ark),
            "minted": self.minted(),
            "callbacks": len(self.depositor.callbacks),
            "gets": self.depositor.gets,
        }

    def timings(self) -> str:
        start = self.times["start"]
        return ", ".join(f"{k} {v - start:.1f}s" for k, v in self.times.items())


def assert_done_once(run: Partitioned, *, ark: str, gets: int, full: int) -> None:
    """The job is Completed and everything it did was done once (see the module)."""
    cluster, store, depositor = run.cluster, run.store, run.depositor
    job = store.jobs.get_job(run.jid)
    batch = store.batches.get_batch(run.bid)
    assert job.status == "Completed", (
        f"job {job.status}: {job.message}\n{run.timings()}\n{cluster.logs()}"
    )
    assert batch.status == "Completed", f"batch {batch.status}: {batch.message}"
    assert job.identifiers["primary_id"] == ark
    assert run.minted() == 1
    storage = LocalStorage(cluster.storage_root)
    assert storage.versions(ark) == [1]
    version = storage.get_version(ark, 1)
    assert version.token == job.jid
    stored = {f.name: f for f in version.files}["producer/object.bin"]
    assert (stored.size, stored.digests["md5"]) == (len(depositor.data), depositor.md5)
    assert cluster.inventory_versions(ark) == [(1, job.jid)]
    assert [h["idempotency-key"] for h in depositor.callbacks] == [f"{job.jid}:notify"]
    assert (depositor.gets, depositor.full) == (gets, full)
    assert [p for p, _ in store.locks.nodes()] == []
    assert_history_follows_the_machine(job)


def assert_history_follows_the_machine(job) -> None:
    """One entry per status version, each leaving the status the one before reached, by a
    move the job's state machine allows (or a note, which keeps the status)."""
    entries = job.history.entries
    assert [e.version for e in entries] == list(range(job.status_version + 1))
    assert entries[0].to_status == "Pending"
    for before, entry in zip(entries, entries[1:], strict=False):
        move = (entry.from_status, entry.to_status)
        assert entry.from_status == before.to_status, (move, entries)
        assert move[0] == move[1] or JOB.can_move(*move), (move, entries)


def committed_by(job, step: str) -> str:
    """Who committed the move out of ``step`` (``worker host:pid``)."""
    return next(e.by for e in job.history.entries if e.from_status == step and e.to_status != step)


def by_worker(proc) -> str:
    return f":{proc.pid}"


# --- the tests -------------------------------------------------------------------------


def test_partitioned_mid_downloading_b_downloads_once_and_completes(
    partition, cluster, store, http_server, tmp_path
):
    """A's download outlives its session; B's must be the one kept, and A's stopped."""
    depositor = Depositor(cluster, http_server, SLOW_SIZE, RATE)
    run = Partitioned(cluster, store, partition, depositor)
    run.start()
    run.wait_inside("Downloading", lambda _job: depositor.sent >= MiB)
    run.start_b()
    run.cut()
    job = run.b_takes_over()
    run.heal_and_watch()
    # Two GETs, A's cut short once A knew it was cut off, B's sent whole.
    assert_done_once(run, ark=first_ark(tmp_path), gets=2, full=1)
    assert committed_by(job, "Downloading").endswith(by_worker(run.b)), job.history.entries


def test_partitioned_mid_processing_b_completes_and_a_changes_nothing(
    partition, cluster, store, http_server
):
    depositor = Depositor(cluster, http_server, SIZE)
    ezid = HeldEzid(http_server, hold="read")
    cluster.env |= ezid.env()
    run = Partitioned(cluster, store, partition, depositor)
    run.minted = lambda: len(ezid.minted)
    run.start()
    job = run.wait_inside("Processing", lambda _job: ezid.holding.is_set())
    ark = job.identifiers["primary_id"]  # saved before describe
    run.start_b()
    run.cut()
    try:
        job = run.b_takes_over()
    finally:
        ezid.released.set()  # A goes on with its step, still cut off
    run.heal_and_watch()
    assert_done_once(run, ark=ark, gets=1, full=1)
    assert committed_by(job, "Processing").endswith(by_worker(run.b)), job.history.entries


def test_partitioned_between_minting_and_saving_the_ark_mints_once(
    partition, cluster, store, http_server, tmp_path
):
    depositor = Depositor(cluster, http_server, SIZE)
    minter = FileLock(cluster.root / "minter" / "99999-fk4.lock")
    run = Partitioned(cluster, store, partition, depositor)
    try:
        run.start()
        run.wait_inside("Processing", lambda _job: minter.held_by(run.a.pid))
        run.start_b()
        run.cut()
    finally:
        minter.release()
    wait_for("A to mint, cut off", lambda: cluster.minted() == 1, cluster)
    job = run.b_takes_over()
    run.heal_and_watch()
    assert_done_once(run, ark=first_ark(tmp_path), gets=1, full=1)
    assert committed_by(job, "Processing").endswith(by_worker(run.b)), job.history.entries


def test_partitioned_mid_storing_stores_one_version(
    partition, cluster, store, http_server, tmp_path
):
    depositor = Depositor(cluster, http_server, SIZE)
    ark = first_ark(tmp_path)
    storage = FileLock(cluster.storage_root / ".locks" / f"{escape_ark(ark)}.lock")
    run = Partitioned(cluster, store, partition, depositor)
    try:
        run.start()
        run.wait_inside("Storing", lambda _job: storage.held_by(run.a.pid))
        run.start_b()
        run.cut()
    finally:
        storage.release()
    wait_for(
        "A to store the version, cut off",
        lambda: LocalStorage(cluster.storage_root).versions(ark) == [1],
        cluster,
    )
    job = run.b_takes_over()
    run.heal_and_watch()
    assert_done_once(run, ark=ark, gets=1, full=1)
    assert committed_by(job, "Storing").endswith(by_worker(run.b)), job.history.entries


def test_a_blip_healed_before_the_session_expires_lets_the_step_commit(
    partition, cluster, store, http_server, tmp_path
):
    """Cut for 1.5 s, well inside the 4 s session: A keeps its session and its lock, and
    commits the step it was in; B, running all along, never gets the job."""
    depositor = Depositor(cluster, http_server, SIZE, RATE)
    run = Partitioned(cluster, store, partition, depositor)
    run.start()
    run.wait_inside("Downloading", lambda _job: depositor.sent >= MiB)
    run.start_b()
    run.cut()
    time.sleep(1.5)
    run.partition.heal()
    assert run.partition.dropped > 0  # a ping or its answer was lost
    job = run.wait_final()
    assert_done_once(run, ark=first_ark(tmp_path), gets=1, full=1)
    after_creation = job.history.entries[1:]
    assert all(e.by.endswith(by_worker(run.a)) for e in after_creation), after_creation
    assert "abandoned" not in cluster.log("worker-a"), cluster.logs()


@pytest.mark.slow  # the 25 s cut is the point
def test_the_dispatcher_cut_off_for_25_seconds_restarts_a_dead_workers_job_once_healed(
    partition, cluster, store, http_server, tmp_path
):
    """A worker dies mid-Downloading while the dispatcher is cut off: only the dispatcher
    enqueues a job whose worker died, so the job waits, unlocked, until the link heals; the
    dispatcher (its session long expired) then has B do it, once."""
    depositor = Depositor(cluster, http_server, SIZE, RATE, slow=1)
    run = Partitioned(cluster, store, partition, depositor)
    run.a = cluster.worker("worker-a")
    dispatcher = cluster.dispatcher(ZK_HOSTS=partition.hosts)
    run.bid = depositor.submit(cluster)
    run.wait_inside("Downloading", lambda _job: depositor.sent >= MiB)
    run.start_b()
    run.cut()
    kill(run.a)
    wait_for(
        "the dead worker's session to expire",
        lambda: run._lock_owner() is None,
        cluster,
        timeout=30,
    )
    time.sleep(max(0.0, run.times["cut"] + DISPATCHER_CUT - time.monotonic()))
    job = store.jobs.get_job(run.jid)
    assert (job.status, job.locked, depositor.gets) == ("Downloading", False, 1), job
    run.partition.heal()
    run.times["healed"] = time.monotonic()
    job = run.wait_final(timeout=60)
    run.times["final"] = time.monotonic()
    assert dispatcher.poll() is None, cluster.logs()
    # A's GET cut short by its death, B's whole.
    assert_done_once(run, ark=first_ark(tmp_path), gets=2, full=1)
    assert committed_by(job, "Downloading").endswith(by_worker(run.b)), job.history.entries
