"""``scale``'s index mode: many completed jobs passing through the tree, and the largest index
directory's listing (the bytes of a ``getChildren`` answer, ``merritt_queue.core.indexdirs``)
against a Java client's limit (ZooKeeper's default jute.maxbuffer), without retention (the old
code: nothing removes finished items unless someone runs cleanup) and with it.

Not the whole pipeline: ``BENCH_SCALE_INDEX_JOBS`` (default 100,000) jobs are created by the
store (``create_batch``, ``create_jobs``) in batches of ``BATCH_JOBS``, and each is then moved
from Pending to Completed in one multi of its own (status, index entry and batch reference, as
a move writes them; no history entry), its batch set to Completed. The jobs arrive at
``BENCH_SCALE_RATE`` jobs a second (default 75, what the ``scale`` pipeline run completes
through 4 workers on this machine; 0: as fast as the feeder goes).

With retention, a thread plays the dispatcher's periodic hook on a session of its own: it calls
``Retention.step()`` as the dispatcher calls its hook (again after the wait the step asks,
at most ``TICK`` seconds), with the default policy (30 days: none of these jobs is old, so only
the pressure of a directory near the limit removes them, oldest first). The directories are
measured after every batch created. Without retention the same jobs arrive as fast as the
feeder goes: nothing runs beside it.

Summary: ``bench scale-index jobs=... old_peak_bytes=... old_ratio=... new_peak_bytes=...
new_ratio=... removed=... longest_step_s=...`` (ratios to the limit; ``longest_step_s`` the
longest slice of the hook, which the dispatcher waits for).
"""

from __future__ import annotations

import os
import threading
import time
import uuid

from bench.common import emit, summary, zk_hosts
from harness import zookeeper
from merritt_queue.core import indexdirs, retention
from merritt_queue.core import tree as t
from merritt_queue.core.records import NewJob
from merritt_queue.core.store import QueueStore
from merritt_queue.core.zk import ZkConfig, connect

PART = "scale-index"
DEFAULT_N = 100_000
DEFAULT_RATE = 75.0
BATCH_JOBS = 100
IN_FLIGHT = 200
TICK = 10.0
PROGRESS_EVERY = 15.0
CONFIGURATION = {"collection": "bench", "profile": "bench", "submitter": "bench/merritt-queue"}


def run(n: int) -> None:
    rate = float(os.environ.get("BENCH_SCALE_RATE") or DEFAULT_RATE)
    # A smaller limit than a Java client's shows the same within a shorter run.
    limit = int(os.environ.get("BENCH_SCALE_LIMIT") or indexdirs.DEFAULT_MAXBUFFER)
    emit(PART, event="config", jobs=n, batch_jobs=BATCH_JOBS, rate=rate, limit=limit)
    new = _side("new", n, rate, limit, with_retention=True)
    old = _side("old", n, 0.0, limit, with_retention=False)
    summary(
        PART,
        jobs=n,
        limit=limit,
        old_peak_bytes=old["peak_bytes"],
        old_ratio=old["peak_bytes"] / limit,
        new_peak_bytes=new["peak_bytes"],
        new_ratio=new["peak_bytes"] / limit,
        removed=new["removed"],
        longest_step_s=new["longest_step"],
        new_seconds=new["seconds"],
    )
    if new["peak_bytes"] >= limit:
        raise SystemExit(f"bench {PART}: an index directory passed the limit with retention")


def _side(label: str, n: int, rate: float, limit: int, *, with_retention: bool) -> dict:
    hosts = zk_hosts()
    chroot = zookeeper.fresh_chroot(f"mq-bench-{PART}-{label}")
    feeder_client = connect(ZkConfig(hosts=hosts, chroot=chroot))
    hook_client = connect(ZkConfig(hosts=hosts, chroot=chroot))
    store, hook_store = QueueStore(feeder_client), QueueStore(hook_client)
    store.init()
    hook = _Hook(hook_store, limit) if with_retention else None
    peak: indexdirs.DirSize | None = None
    started = last_report = time.monotonic()
    try:
        if hook:
            hook.start()
        for done in range(0, n, BATCH_JOBS):
            _feed_batch(store, min(BATCH_JOBS, n - done))
            sizes = indexdirs.measure(feeder_client, limit)
            largest = max(sizes, key=lambda s: s.bytes)
            if peak is None or largest.bytes > peak.bytes:
                peak = largest
            if rate:
                time.sleep(max(0.0, started + (done + BATCH_JOBS) / rate - time.monotonic()))
            if time.monotonic() - last_report >= PROGRESS_EVERY:
                last_report = time.monotonic()
                emit(
                    PART,
                    event="progress",
                    side=label,
                    jobs=done + BATCH_JOBS,
                    largest=[largest.path, largest.bytes, round(largest.ratio, 3)],
                    removed=hook.removed if hook else 0,
                )
        seconds = time.monotonic() - started
        if hook:
            hook.stop()
        assert peak is not None
        out = {
            "peak_bytes": peak.bytes,
            "peak_path": peak.path,
            "seconds": round(seconds, 1),
            "removed": hook.removed if hook else 0,
            "longest_step": round(hook.longest, 3) if hook else 0.0,
            "failed": hook.failed if hook else 0,
        }
        emit(PART, event="side", side=label, **out, ratio=round(peak.bytes / limit, 3))
        return out
    finally:
        if hook:
            hook.stop()
        for client in (feeder_client, hook_client):
            client.stop()
            client.close()
        zookeeper.delete_chroot(hosts, chroot, "bench")


def _feed_batch(store: QueueStore, jobs: int) -> None:
    """A batch of ``jobs`` jobs created by the store, each then moved to Completed."""
    client = store.client
    bid = store.new_batches.create_batch(
        {"batchID": f"bid-{uuid.uuid4()}", "collection": "bench", "profile": "bench"}
    ).id
    jids = store.new_jobs.create_jobs(bid, [NewJob(CONFIGURATION)] * jobs)
    client.ensure_path(t.batch_job_dir(bid, "batch-completed"))
    status = t.encode_json(t.job_status_record("Completed", "Notify"))
    pending = []
    for jid in jids:
        tx = client.transaction()
        tx.delete(t.job_index("Pending", 5, jid))
        tx.create(t.job_index("Completed", 5, jid))
        tx.set_data(t.job_node(jid, "status"), status)
        tx.delete(t.batch_job_ref(bid, "Pending", jid))
        tx.create(t.batch_job_ref(bid, "Completed", jid))
        pending.append(tx.commit_async())
        if len(pending) >= IN_FLIGHT:
            _settle(pending)
    _settle(pending)
    client.set(t.batch_node(bid, "status"), t.encode_json(t.batch_status_record("Completed")))


def _settle(pending: list) -> None:
    for result in pending:
        outcome = result.get()
        if any(isinstance(r, Exception) for r in outcome):
            raise RuntimeError(f"bench {PART}: a move was refused: {outcome}")
    pending.clear()


class _Hook:
    """The dispatcher's periodic hook, retention's part of it, on a thread of its own."""

    def __init__(self, store: QueueStore, limit: int):
        policy = retention.Policy(retention_seconds=30 * 86400, limit=limit)
        self.keeper = retention.Retention(store, policy)
        self.removed = self.failed = 0
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="retention", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            done = self.keeper.step()
            self.longest = max(self.longest, time.monotonic() - began)
            self.removed += sum(r.result == "done" for r in done.rows)
            self.failed += sum(r.result == "failed" for r in done.rows)
            self._stop.wait(min(done.wait, TICK))
