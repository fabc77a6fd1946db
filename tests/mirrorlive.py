"""The live mirror's fixtures: the Django process's own store, writing through, and the
follower running in a thread, as ``reconcile --watch`` runs it."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import OperationalError

from batches.models import Batch
from jobs.models import Job, MirrorState
from merritt_queue.project import runtime
from mirror import writethrough
from mirror.follow import Follower

SUBMISSION = {
    "profile": "demo",
    "collection": "demo",
    "submitter": "sam",
    "type": "file",
    "erc_what": "A batch",
    "batchID": "b-1",
    "submitted": "2026-11-21 14:15:25 -0800",
}
CONFIG = {"profile": "demo", "collection": "demo", "submitter": "sam", "local_id": "conf-id"}


@pytest.fixture
def live(zk_config, settings):
    """The Django process's own store (``runtime.get_store()``), on the test's chroot."""
    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    # The freshness row is written at most once a second per process: a test that ran
    # just before (its rows rolled back) must not keep this one's from being written.
    writethrough._mark_write_through.last = 0.0
    runtime.close()
    yield runtime.get_store()
    runtime.close()


def wait_for(check, timeout: float = 10.0):
    """Poll ``check`` until it returns something true; the mirror is written by another thread."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except (OperationalError, Job.DoesNotExist, Batch.DoesNotExist):
            value = None  # SQLite busy with the follower's write, or the row not there yet
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {check}")
        time.sleep(0.05)


def seen_as(store, jid: str) -> str:
    """Who a watcher's row names: the writer its history entry names, or "watch" when the
    store keeps no history node."""
    return "watch" if store.jobs.get_job(jid).history is None else store.changes.actor


def make_jobs(store, n: int, bid: str | None = None) -> tuple[str, list[str]]:
    bid = bid or store.new_batches.create_batch(dict(SUBMISSION, batchID=None)).id
    return bid, [store.new_jobs.create_job(bid, dict(CONFIG, local_id=f"l{i}")) for i in range(n)]


@pytest.fixture
def follower(make_store, transactional_db):
    """``Follower.run`` in a thread on a client of its own; stopped after the test."""
    stop = threading.Event()
    runner = Follower(make_store(), reconcile_seconds=3600)
    thread = threading.Thread(target=runner.run, args=(stop,), daemon=True)

    def start():
        thread.start()
        wait_for(lambda: MirrorState.objects.filter(name="full").exists())
        return runner

    yield start
    stop.set()
    if thread.is_alive():
        thread.join(timeout=10)
