"""Fencing of a step's attempts (issue 31): a worker cut off from ZooKeeper keeps running
while another worker takes its job; the stale attempt must neither publish over, nor delete,
the newer attempt's files or storage lock, and a cut-off step stops starting side effects.

The interleavings are made deterministic in one process: two stores (two sessions) are two
workers, a session is expired by closing it from a twin client (as ZooKeeper does when it
stops hearing from a partitioned client), and each download is held mid-body by the test's
HTTP server until the test lets it go on.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState

from merritt_queue.core import tree as t
from merritt_queue.core.attempt import STAGING, Attempt, AttemptStale, ConnectionWatch
from merritt_queue.core.runner import StepResult, run_job_step
from merritt_queue.core.store import QueueStore
from merritt_queue.services.fetch import CHUNK_SIZE, Fetcher
from pipeline.download import _download
from pipeline.jobhandlers import _bind, storing
from pipeline.payload import PayloadFile
from pipeline.services import Services
from tests.httpserver import direct_session

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")

# The server's chunks are the fetcher's reads: the first is written before the hold.
CHUNK = CHUNK_SIZE
CHUNKS = 8
ARK = "ark:/13030/m5fence"


class GatedBody:
    """The body of one URL, each request's held after its first chunk until the test lets
    that request (by its order of arrival) go on."""

    def __init__(self) -> None:
        self.arrived: list[threading.Event] = [threading.Event() for _ in range(4)]
        self.go_on: list[threading.Event] = [threading.Event() for _ in range(4)]
        self._count = 0
        self._lock = threading.Lock()

    def chunks(self):
        with self._lock:
            n, self._count = self._count, self._count + 1
        yield self.byte(n) * CHUNK
        self.arrived[n].set()
        assert self.go_on[n].wait(30), "the test never let the download go on"
        for _ in range(CHUNKS - 1):
            yield self.byte(n) * CHUNK

    @staticmethod
    def byte(n: int) -> bytes:
        return bytes([ord("A") + n])


def services_for(store: QueueStore, work: Path) -> Services:
    return Services(
        store=store,
        fetcher=Fetcher(allow_loopback=True, session_factory=direct_session),
        minter=None,
        storage=None,
        inventory=None,  # type: ignore[arg-type]
        notifier=None,  # type: ignore[arg-type]
        work_root=work,
    )


def downloading_job(store: QueueStore) -> str:
    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {"collection": "demo", "payload_type": "manifest"})
    for status in ("Estimating", "Provisioning", "Downloading"):
        store.moves.transition_job(jid, status)
    return jid


def download_handler(services: Services, url: str):
    files = [PayloadFile(url, "big.bin", CHUNK * CHUNKS)]
    return _bind(lambda s, job: _download(s, job, files), services)


def in_thread(fn) -> tuple[threading.Thread, list]:
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def expire_session(client: KazooClient) -> None:
    """End ``client``'s session as ZooKeeper ends a partitioned client's, and wait until the
    client has noticed and reconnected in a new session (a stale worker coming back)."""
    sid, password = client.client_id
    hosts = ",".join(f"{host}:{port}" for host, port in client.hosts)
    twin = KazooClient(hosts=hosts, client_id=(sid, password))
    twin.start()
    twin.stop()
    twin.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if client.connected and client.client_id and client.client_id[0] != sid:
            return
        time.sleep(0.05)
    raise AssertionError("the client never noticed its session ended")


def wait_for(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "waited in vain"
        time.sleep(0.01)


def first_chunk_written(folder: Path) -> Path:
    """The one part file under ``folder``, once it holds the body's first chunk."""

    def written() -> bool:
        parts = list(folder.rglob("*.part"))
        return bool(parts) and parts[0].stat().st_size == CHUNK

    wait_for(written)
    return next(folder.rglob("*.part"))


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_a_stale_download_neither_publishes_over_nor_deletes_the_newer_attempts_files(
    make_store, http_server, tmp_path
):
    body = GatedBody()
    url = http_server.behave("/big.bin", generate=(CHUNK * CHUNKS, body.chunks))
    worker_a, worker_b = make_store(), make_store()
    worker_a.init()
    jid = downloading_job(worker_a)
    work = tmp_path / "work"
    step_a, report_a = in_thread(
        lambda: run_job_step(
            worker_a, jid, "Downloading", download_handler(services_for(worker_a, work), url)
        )
    )
    assert body.arrived[0].wait(10)
    # A is cut off mid-download: its session expires and B takes the job.
    expire_session(worker_a.client)
    step_b, report_b = in_thread(
        lambda: run_job_step(
            worker_b, jid, "Downloading", download_handler(services_for(worker_b, work), url)
        )
    )
    assert body.arrived[1].wait(10)
    # A's download goes on while B's is half written, then B's.
    body.go_on[0].set()
    step_a.join(30)
    body.go_on[1].set()
    step_b.join(30)
    assert report_a[0].result == StepResult.ABANDONED
    assert report_b[0].result == StepResult.COMMITTED
    job = worker_b.jobs.get_job(jid)
    assert job.status == "Processing", job.message
    producer = work / "jobs" / jid / "producer"
    assert files_under(producer) == ["big.bin"]
    assert (producer / "big.bin").read_bytes() == GatedBody.byte(1) * CHUNK * CHUNKS
    # Both attempts removed their staging folders, each its own.
    assert files_under(work / "jobs" / jid / STAGING) == []


def test_a_stale_attempt_cannot_delete_a_newer_attempts_storage_lock(make_store, zk):
    stale_store, newer_store = make_store(), make_store()
    stale_store.init()
    jid = "jid0000000042"
    stale = stale_store.locks.lock_storage(ARK, owner=jid)
    # The older attempt's worker was cut off; the job's next attempt takes its lock back.
    newer = newer_store.locks.lock_storage(ARK, owner=jid)
    assert stale and newer
    stale_store.locks.release_lock(stale)
    assert zk.exists(t.storage_lock(ARK)), "the stale attempt deleted the newer one's lock"
    assert zk.get(t.storage_lock(ARK))[0] == jid.encode()  # still just the job id (zk-tree.md)
    newer_store.locks.release_lock(newer)
    assert not zk.exists(t.storage_lock(ARK))


def test_another_jobs_attempt_neither_takes_nor_deletes_a_storage_lock(make_store, zk):
    holder, other = make_store(), make_store()
    holder.init()
    held = holder.locks.lock_storage(ARK, owner="jid0000000001")
    assert held and other.locks.lock_storage(ARK, owner="jid0000000002") is None
    assert other.locks.lock_storage(ARK) is None
    holder.locks.release_lock(held)
    assert not zk.exists(t.storage_lock(ARK))


def downloading_in_thread(make_store, http_server, work: Path, cut_off: float):
    """A worker's Downloading step running in a thread, held after its first chunk; the
    worker, the job, the body's gates, the thread, its report and the connection's watch."""
    body = GatedBody()
    url = http_server.behave("/big.bin", generate=(CHUNK * CHUNKS, body.chunks))
    worker = make_store()
    worker.init()
    worker.locks.step_cut_off = cut_off
    jid = downloading_job(worker)
    step, report = in_thread(
        lambda: run_job_step(
            worker, jid, "Downloading", download_handler(services_for(worker, work), url)
        )
    )
    assert body.arrived[0].wait(10)
    watch = worker.locks._watch
    assert watch is not None
    return worker, jid, body, step, report, watch


def test_a_cut_off_download_stops_between_chunks_and_gives_up_past_the_bound(
    make_store, http_server, tmp_path
):
    work = tmp_path / "work"
    worker, jid, body, step, report, watch = downloading_in_thread(
        make_store, http_server, work, cut_off=1.0
    )
    part = first_chunk_written(work / "jobs" / jid)
    # kazoo tells its listeners the connection is suspended (what a dropped link gives).
    watch._on_state(KazooState.SUSPENDED)
    cut_at = time.monotonic()
    body.go_on[0].set()
    time.sleep(0.5)
    assert part.stat().st_size == CHUNK  # the body goes on, but nothing more is written
    step.join(30)
    assert time.monotonic() - cut_at >= 0.9  # it waited for the connection to come back
    assert report[0].result == StepResult.ABANDONED
    assert files_under(work / "jobs" / jid) == []  # its own staging files removed
    watch._on_state(KazooState.CONNECTED)
    job = worker.jobs.get_job(jid)
    assert job.status == "Downloading" and not job.locked


def test_a_download_suspended_briefly_goes_on_once_the_session_is_back(
    make_store, http_server, tmp_path
):
    worker, jid, body, step, report, watch = downloading_in_thread(
        make_store, http_server, tmp_path / "work", cut_off=30.0
    )
    watch._on_state(KazooState.SUSPENDED)
    body.go_on[0].set()
    step.join(0.5)
    assert step.is_alive()  # held at the next chunk while suspended
    watch._on_state(KazooState.CONNECTED)
    step.join(30)
    assert report[0].result == StepResult.COMMITTED
    assert worker.jobs.get_job(jid).status == "Processing"


@pytest.mark.parametrize("what", ["vanished", "replaced"])
def test_a_vanished_or_replaced_part_file_is_retried_later_never_failed(
    what, make_store, http_server, tmp_path
):
    body = GatedBody()
    url = http_server.behave("/big.bin", generate=(CHUNK * CHUNKS, body.chunks))
    worker = make_store()
    worker.init()
    jid = downloading_job(worker)
    work = tmp_path / "work"
    step, report = in_thread(
        lambda: run_job_step(
            worker, jid, "Downloading", download_handler(services_for(worker, work), url)
        )
    )
    assert body.arrived[0].wait(10)
    part = first_chunk_written(work / "jobs" / jid)
    part.unlink()
    if what == "replaced":
        part.write_bytes(b"someone else's")
    body.go_on[0].set()
    step.join(30)
    assert report[0].result == StepResult.DEFERRED
    job = worker.jobs.get_job(jid)
    assert job.status == "Downloading", job.message
    assert "big.bin" in job.message and "again later" in job.message


def test_every_attempt_has_its_own_name_and_staging_folder(tmp_path):
    one, two = Attempt.unfenced("jid0000000001"), Attempt.unfenced("jid0000000001")
    assert one.token != two.token
    assert one.staging(tmp_path) != two.staging(tmp_path)
    assert one.staging(tmp_path).parent == tmp_path / STAGING
    one.check("do anything")  # unfenced: a handler run outside the runner


def test_a_stale_attempt_raises_a_lock_lost_the_runner_abandons_on(make_store):
    worker = make_store()
    worker.init()
    jid = downloading_job(worker)
    job = worker.job_locks.lock_job(jid)
    attempt = worker.locks.begin_attempt(job)
    attempt.check("write")
    expire_session(worker.client)
    with pytest.raises(AttemptStale, match="session that took the job's lock has ended"):
        attempt.check("write")


def test_a_stale_storing_attempt_leaves_the_newer_attempts_storage_lock_alone(
    make_store, zk, tmp_path
):
    stale_store, newer_store = make_store(), make_store()
    stale_store.init()
    jid = downloading_job(stale_store)
    for status in ("Processing", "Storing"):
        stale_store.moves.transition_job(jid, status)
    stale_store.job_data.save_job_data(jid, "identifiers", {"primary_id": ARK, "local_id": []})
    stale_job = stale_store.job_locks.lock_job(jid)
    stale = stale_store.locks.begin_attempt(stale_job)
    expire_session(stale_store.client)
    newer = newer_store.locks.lock_storage(ARK, owner=jid)
    assert newer
    before = zk.exists(t.storage_lock(ARK))
    services = services_for(stale_store, tmp_path / "work").for_attempt(stale)
    with pytest.raises(AttemptStale):
        storing(services, stale_job)
    after = zk.exists(t.storage_lock(ARK))
    assert after is not None and (after.czxid, after.version) == (before.czxid, before.version)


class _Reconnecting:
    """What an attempt's watch reads of kazoo's client: while it reconnects, kazoo names no
    session (``client_id`` is None until the session is live again)."""

    def __init__(self) -> None:
        self.state, self.client_id, self.listeners = KazooState.CONNECTED, (7, b"pw"), []

    def add_listener(self, listener) -> None:
        self.listeners.append(listener)

    def go(self, state: str, client_id) -> None:
        self.state, self.client_id = state, client_id
        for listener in self.listeners:
            listener(state)


def test_a_reconnect_within_the_session_is_waited_out_not_taken_for_a_new_session():
    """Before: the session was compared while kazoo named none, so the 1.5 s blip of the
    partition tests abandoned a download that its own session went on to hold."""
    client = _Reconnecting()
    watch = ConnectionWatch(client, give_up=30.0)  # type: ignore[arg-type]
    attempt = Attempt.begin(watch, "jid1", "Downloading", 3, 7)
    client.go(KazooState.SUSPENDED, None)
    done = threading.Event()

    def check():
        attempt.check("write more")
        done.set()

    waiter = threading.Thread(target=check, daemon=True)
    waiter.start()
    assert not done.wait(0.3)  # held while cut, not raised
    client.go(KazooState.CONNECTED, (7, b"pw"))
    assert done.wait(5)
    client.go(KazooState.SUSPENDED, None)
    client.go(KazooState.CONNECTED, (8, b"pw"))  # a new session: another may run the step
    with pytest.raises(AttemptStale, match="session that took the job's lock has ended"):
        attempt.check("write more")
