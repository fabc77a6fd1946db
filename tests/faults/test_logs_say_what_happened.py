"""Issue 31: after a partition the logs say what happened, and a cut-off worker's download
slot comes back.

No "released" when nothing was, a reason in every retry line (kazoo's connection errors
have an empty ``str()``), a lost connection reported once as a warning naming what repairs it.
"""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from kazoo.exceptions import ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from merritt_queue.core import tree as t
from merritt_queue.core.errors import LockLost
from merritt_queue.core.reasons import describe

pytest_plugins = ["tests.mirrorlive"]


def _lines(caplog, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


# --- describing an exception --------------------------------------------------------------


def test_an_exception_is_described_by_its_type_and_message_or_a_sentence():
    assert describe(ConnectionLoss()) == "the connection to ZooKeeper was lost (ConnectionLoss)"
    assert describe(SessionExpiredError()) == "the ZooKeeper session expired (SessionExpiredError)"
    assert describe(KazooTimeoutError("Connection time-out")) == (
        "ZooKeeper did not answer in time (KazooTimeoutError: Connection time-out)"
    )
    assert describe(ConnectionRefusedError(111, "Connection refused")) == (
        "ConnectionRefusedError: [Errno 111] Connection refused"
    )
    assert describe(RuntimeError()) == "RuntimeError (no message)"
    # The queue's own errors are sentences written to be read as they are.
    assert describe(LockLost("job j: the lock is gone")) == "job j: the lock is gone"


# --- 1. orphaned locks --------------------------------------------------------------------


def test_an_orphaned_lock_is_said_released_only_when_it_was(store, make_store, caplog):
    worker = make_store()
    ours, theirs, gone = (t.localid_lock(n) for n in ("ours", "theirs", "gone"))
    worker.client.create(ours, ephemeral=True)
    store.client.create(theirs, ephemeral=True)
    worker.session.orphaned |= {ours, theirs, gone}
    with caplog.at_level(logging.DEBUG, logger="merritt_queue.core.store"):
        assert worker.session.release_orphaned_locks() == 3
    assert worker.session.orphaned == set()
    assert worker.client.exists(ours) is None and store.client.exists(theirs) is not None
    lines = _lines(caplog, "merritt_queue.core.store")
    assert [line for line in lines if line.startswith("released")] == [
        f"released {ours}, left behind by a ZooKeeper outage"
    ]
    assert (
        f"{theirs}, left behind by a ZooKeeper outage, is another session's lock now: "
        "left alone, nothing released"
    ) in lines
    assert (
        f"{gone}, left behind by a ZooKeeper outage, is gone already (its session ended, "
        "or it was released meanwhile): nothing released"
    ) in lines


# --- 2. retry lines carry a reason --------------------------------------------------------


def test_a_failed_sweep_says_why_it_retries(store, redis, caplog, monkeypatch):
    from merritt_queue.core.dispatcher import Dispatcher, DispatcherConfig
    from merritt_queue.project.tasks import TASKS

    dispatcher = Dispatcher(store, redis, TASKS, DispatcherConfig())

    def lost() -> int:
        dispatcher.stop.set()
        raise ConnectionLoss()

    monkeypatch.setattr(dispatcher, "sweep", lost)
    with caplog.at_level(logging.WARNING, logger="merritt_queue.core.dispatcher"):
        dispatcher.run()
    assert _lines(caplog, "merritt_queue.core.dispatcher") == [
        "dispatch sweep failed, retrying: the connection to ZooKeeper was lost (ConnectionLoss)"
    ]


def test_a_batch_left_to_the_dispatcher_says_why(store, redis, caplog, monkeypatch):
    from merritt_queue.core import handover
    from merritt_queue.project.tasks import TASKS

    class Away:
        def paused(self) -> bool:
            raise ConnectionLoss()

    monkeypatch.setattr(handover, "pause_flag", lambda _client: Away())
    with caplog.at_level(logging.INFO, logger="merritt_queue.core.handover"):
        assert handover.new_batch(store, redis, TASKS, "b1") is False
        assert handover.new_jobs(store, redis, TASKS, "b1") == 0
        assert handover.batch_report(store, redis, TASKS, "b1", "Completed") is False
    reason = "the connection to ZooKeeper was lost (ConnectionLoss)"
    assert _lines(caplog, "merritt_queue.core.handover") == [
        f"batch b1: left to the dispatcher: {reason}",
        f"batch b1: jobs left to the dispatcher: {reason}",
        f"batch b1: report left to the dispatcher: {reason}",
    ]


# --- 5. the runner's abandon line ---------------------------------------------------------


def test_an_abandoned_step_says_what_happened_and_that_it_runs_again(store, caplog):
    from merritt_queue.core.runner import StepResult, run_job_step

    bid = store.new_batches.create_batch({"batchID": str(uuid.uuid4())}).id
    jid = store.new_jobs.create_job(bid, {})

    def cut_off(_job):
        raise ConnectionLoss()

    with caplog.at_level(logging.WARNING, logger="merritt_queue.core.runner"):
        report = run_job_step(store, jid, "Pending", cut_off)
    assert report.result == StepResult.ABANDONED
    assert _lines(caplog, "merritt_queue.core.runner") == [
        f"job {jid}: its Pending step was abandoned: the connection to ZooKeeper was lost "
        "(ConnectionLoss). Its commit, if under way, may or may not have reached ZooKeeper, "
        "whose status of the job says which; the step runs again on whichever worker takes "
        "the job next, if it is still to do"
    ]
    assert store.jobs.get_job(jid).status == "Pending" and not store.client.exists(
        t.job_node(jid, "lock")
    )

    def fenced(_job):
        raise LockLost(f"job {jid}: the lock is gone; nothing was written")

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="merritt_queue.core.runner"):
        run_job_step(store, jid, "Pending", fenced)
    assert _lines(caplog, "merritt_queue.core.runner") == [
        f"job {jid}: its Pending step was abandoned: job {jid}: the lock is gone; nothing was "
        "written. Nothing of it was committed; the step runs again on whichever worker takes "
        "the job next, if it is still to do"
    ]


# --- 3. the mirror's write-through --------------------------------------------------------

WRITE_THROUGH = "mirror.writethrough"


def _records(caplog, logger: str, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and r.levelno == level]


def test_a_lost_zookeeper_connection_is_one_warning_naming_the_reconciler(
    live, transactional_db, caplog, monkeypatch
):
    from mirror import writethrough
    from tests.mirrorlive import SUBMISSION

    real = writethrough.apply_change

    def away(*_a):
        raise ConnectionLoss()

    monkeypatch.setattr(writethrough, "apply_change", away)
    with caplog.at_level(logging.INFO, logger=WRITE_THROUGH):
        for _ in range(3):
            live.new_batches.create_batch(dict(SUBMISSION, batchID=None))
        monkeypatch.setattr(writethrough, "apply_change", real)
        live.new_batches.create_batch(dict(SUBMISSION, batchID=None))
    assert not _records(caplog, WRITE_THROUGH, logging.ERROR)
    (warning,) = _records(caplog, WRITE_THROUGH, logging.WARNING)
    assert warning.exc_info is None
    assert warning.getMessage() == (
        "mirror write-through paused: the connection to ZooKeeper was lost (ConnectionLoss). "
        "ZooKeeper has every write; the reconciler (manage.py reconcile --watch) brings the "
        "mirror's rows up to date, at the latest at its next full reconcile "
        "(MQ_RECONCILE_SECONDS)"
    )
    (back,) = _records(caplog, WRITE_THROUGH, logging.INFO)
    assert back.getMessage() == "mirror write-through working again"


def test_a_lost_database_connection_is_one_warning_and_a_bug_still_an_error(
    live, transactional_db, caplog, monkeypatch
):
    from django.db import InterfaceError, OperationalError

    from mirror import writethrough
    from tests.mirrorlive import SUBMISSION

    def closed(*_a):  # what Django raises once the server has dropped the connection
        raise InterfaceError("connection already closed")

    monkeypatch.setattr(writethrough, "apply_change", closed)
    with caplog.at_level(logging.INFO, logger=WRITE_THROUGH):
        live.new_batches.create_batch(dict(SUBMISSION, batchID=None))
        live.new_batches.create_batch(dict(SUBMISSION, batchID=None))
    assert not _records(caplog, WRITE_THROUGH, logging.ERROR)
    (warning,) = _records(caplog, WRITE_THROUGH, logging.WARNING)
    assert warning.getMessage().startswith(
        "mirror write-through paused: the connection to the database was lost "
        "(InterfaceError: connection already closed). ZooKeeper has every write;"
    )

    def bug(*_a):  # an operational error on a connection that still answers: not a loss
        raise OperationalError("no such table: jobs_job")

    caplog.clear()
    monkeypatch.setattr(writethrough, "apply_change", bug)
    with caplog.at_level(logging.INFO, logger=WRITE_THROUGH):
        live.new_batches.create_batch(dict(SUBMISSION, batchID=None))
    (error,) = _records(caplog, WRITE_THROUGH, logging.ERROR)
    assert error.exc_info is not None and "mirror write-through of batch" in error.getMessage()


def test_the_mirror_follower_tells_of_a_lost_connection_once(db, caplog, monkeypatch):
    """Before: an ERROR with a traceback every second and a half for as long as ZooKeeper
    was away."""
    import threading
    import types

    from mirror.follow import Follower

    # No ZooKeeper at all: the loop's steps are replaced below.
    store = types.SimpleNamespace(client=None)
    follower = Follower(store=store, reconcile_seconds=3600)  # type: ignore[arg-type]
    stop, calls = threading.Event(), []

    def step():
        calls.append(1)
        if len(calls) >= 5:
            stop.set()
        if len(calls) <= 3:
            raise ConnectionLoss()

    monkeypatch.setattr(follower, "install_watches", lambda: None)
    monkeypatch.setattr(follower, "reconcile", lambda: None)
    monkeypatch.setattr(follower, "step", step)
    monkeypatch.setattr(stop, "wait", lambda *_a, **_k: stop.is_set())
    with caplog.at_level(logging.DEBUG, logger="mirror.follow"):
        follower.run(stop)
    assert not _records(caplog, "mirror.follow", logging.ERROR)
    (warning,) = _records(caplog, "mirror.follow", logging.WARNING)
    assert warning.exc_info is None and warning.getMessage().startswith(
        "mirror follower paused: the connection to ZooKeeper was lost (ConnectionLoss). "
        "ZooKeeper keeps every change"
    )
    (back,) = _records(caplog, "mirror.follow", logging.INFO)
    assert back.getMessage() == "mirror follower working again"


# --- 4. a cut-off worker's download slot --------------------------------------------------


def _expire(client, hosts: str) -> None:
    """End ``client``'s session on the server, as a partition longer than its timeout does:
    closing a second client on the same session expires it."""
    from kazoo.client import KazooClient

    session_id, password = client.client_id
    twin = KazooClient(hosts=hosts, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()


def test_a_cut_off_worker_s_download_slot_goes_to_another_worker(
    store, make_store, zk_config, redis
):
    from types import SimpleNamespace

    from merritt_queue.services.hostslots import HostFull, HostSlots
    from pipeline import download
    from pipeline.payload import PayloadFile

    bid = store.new_batches.create_batch({"batchID": str(uuid.uuid4())}).id
    store.new_jobs.create_job(bid, {})
    worker = make_store()
    job = worker.job_locks.acquire_job("Pending")
    cut_off = SimpleNamespace(store=worker, host_slots=HostSlots(redis, limit=1, ttl=1.5))
    other = HostSlots(redis, limit=1, ttl=1.5)
    files = [PayloadFile("http://example.org/a.txt", "a.txt")]
    with download._host_slots(cut_off, job, files):
        time.sleep(2.5)  # renewed past its time to live while its session lasts
        with pytest.raises(HostFull):
            other.hold(["example.org"])
        session = worker.session.session_id
        _expire(worker.client, zk_config.hosts)
        deadline = time.monotonic() + 1.5 + 5.0
        taken = None
        while taken is None and time.monotonic() < deadline:
            try:
                taken = other.hold(["example.org"])
            except HostFull:
                time.sleep(0.1)
        # The download goes on (nothing stopped it yet), but its slot is another's.
        assert taken is not None and taken.hosts == ["example.org"]
        assert worker.session.session_id != session
        taken.release()
    assert other.in_flight("example.org") == 0


def test_an_abandoned_download_gives_its_slot_back_at_once(store, make_store, redis):
    from types import SimpleNamespace

    from merritt_queue.services.hostslots import HostSlots
    from pipeline import download
    from pipeline.payload import PayloadFile

    bid = store.new_batches.create_batch({"batchID": str(uuid.uuid4())}).id
    store.new_jobs.create_job(bid, {})
    worker = make_store()
    job = worker.job_locks.acquire_job("Pending")
    slots = HostSlots(redis, limit=1, ttl=30.0)
    files = [PayloadFile("http://example.org/a.txt", "a.txt")]
    with pytest.raises(LockLost):
        with download._host_slots(SimpleNamespace(store=worker, host_slots=slots), job, files):
            assert slots.in_flight("example.org") == 1
            raise LockLost("job j: the lock is gone")
    assert slots.in_flight("example.org") == 0
