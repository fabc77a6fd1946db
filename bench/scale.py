"""One big batch through the whole queue: time, throughput, and how big ZooKeeper's tree gets.

Set-up (untimed), under a fresh ``var/bench/tmp-scale-<uuid>`` removed at the end: the
``pipeline`` part's machinery (``bench.common``) with ``BENCH_SCALE_JOBS`` (default 10,000)
random 4 KiB files in one ``mrt-single-file-batch-manifest``, served from 127.0.0.1, a fresh
ZooKeeper chroot, the throw-away Redis (flushed) and a file SQLite mirror.

Timed, from just before ``manage.py submit`` until the batch is final: ``run_dispatcher``
and ``WORKERS`` ``rqworker`` processes on every queue, all started fresh.

While it runs, a thread asks ZooKeeper for ``mntr`` every second and keeps the peaks of
``zk_znode_count`` and ``zk_approximate_data_size`` (the whole server's figures; the bench's
chroot is nearly all of it on the throw-away ZooKeeper). The chroot is walked (every node's
``dataLength`` from its stat) whenever the node count has grown by a quarter since the last
walk, at most every ``WALK_EVERY`` seconds, and once more after the batch is final, when
every job node and the batch's status report exist. A ZooKeeper node holds at most 1 MB
(``jute.maxbuffer``), so a node whose data grows with the number of jobs caps how big a
batch can be: any node under ``/batches/<bid>`` (other than the ``states/`` index
directories, whose children, not data, grow) bigger than ``PER_BATCH_LIMIT``, and any node
at all bigger than ``ANY_NODE_LIMIT``, is flagged, and the part exits non-zero after its
summary. The largest child listing (the bytes a ``getChildren`` of an index directory
returns) is reported too, for information: cleanup is what keeps those small.

Summary: ``bench scale jobs=... seconds=... jobs_per_s=... znodes=... max_znode_bytes=...``
(``znodes`` is the peak ``zk_znode_count``; ``max_znode_bytes`` the largest node seen in
any walk). The machine has 2 cores: the 4 workers, the dispatcher, ZooKeeper, Redis and
this process share them.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from bench.common import (
    QueueRun,
    emit,
    env_int,
    queue_processes,
    queue_run,
    report_finished,
    submit_and_start,
    summary,
    wait_batch,
    zk_hosts,
)
from bench.cpu import CpuMeter
from bench.zkwords import read_mntr

PART = "scale"
DEFAULT_N = 10_000
FILE_SIZE = 4096
WORKERS = 4
SAMPLE_EVERY = 1.0
WALK_EVERY = 60.0
WALK_GROWTH = 1.25
PROGRESS_EVERY = 10.0
# "A few KB": a per-batch node above this is taken to grow with the batch's job count.
PER_BATCH_LIMIT = 4096
ANY_NODE_LIMIT = 100 * 1024
ZK_NODE_LIMIT = 1024 * 1024
WALK_CONCURRENCY = 2000


def run(args) -> None:
    """``BENCH_SCALE_MODE``: ``pipeline`` (one batch through the whole queue), ``index``
    (``bench.indexscale``: completed jobs passing through the tree, index directories against
    the listing limit) or ``both`` (the default)."""
    mode = os.environ.get("BENCH_SCALE_MODE") or "both"
    if mode not in ("pipeline", "index", "both"):
        raise SystemExit(f"bench {PART}: BENCH_SCALE_MODE={mode!r}: pipeline, index or both")
    if mode in ("index", "both"):
        from bench import indexscale

        indexscale.run(env_int(PART, "BENCH_SCALE_INDEX_JOBS", indexscale.DEFAULT_N))
    if mode in ("pipeline", "both"):
        _pipeline()


def _pipeline() -> None:
    n = env_int(PART, "BENCH_SCALE_JOBS", DEFAULT_N)
    read_mntr(zk_hosts())  # a ZooKeeper without mntr fails here, before the set-up
    config = {"jobs": n, "workers": WORKERS, "cores": os.cpu_count()}
    with queue_run(PART, n, FILE_SIZE, **config) as queue:
        seconds, monitor = _timed(queue, n)
    largest = monitor.largest
    summary(
        PART,
        jobs=n,
        seconds=seconds,
        jobs_per_s=n / seconds,
        znodes=monitor.peak_znodes,
        max_znode_bytes=largest.size if largest else 0,
    )
    if monitor.flagged:
        raise SystemExit(
            f"bench {PART}: {len(monitor.flagged)} node(s) grow with the batch: "
            + "; ".join(f"{f.path} {f.size} bytes ({f.why})" for f in monitor.flagged.values())
        )


def _timed(queue: QueueRun, n: int) -> tuple[float, Monitor]:
    with queue_processes(PART, queue) as (store, procs):
        monitor = Monitor(queue.hosts, store.client)
        try:
            meter = CpuMeter()
            monitor.start()
            bid, start = submit_and_start(PART, queue, procs, WORKERS, meter)
            batch, first_move = wait_batch(
                PART,
                store,
                bid,
                start,
                procs,
                timeout=600.0 + n * 0.5,
                progress_every=PROGRESS_EVERY,
                on_progress=monitor.progress,
            )
            seconds = time.perf_counter() - start
            monitor.stop()
            report_finished(PART, store, batch, n, procs, meter, seconds, first_move)
            monitor.walk("after")  # every node exists now, the status report too
            monitor.report()
            return seconds, monitor
        finally:
            monitor.stop()


@dataclass
class Node:
    path: str  # within the chroot
    size: int
    why: str = ""


@dataclass
class Walk:
    label: str
    nodes: int = 0
    data_bytes: int = 0
    seconds: float = 0.0
    largest: Node | None = None
    largest_listing: Node | None = None  # size: bytes of its children's names
    flagged: list[Node] = field(default_factory=list)


class Monitor:
    """``mntr`` peaks from a sampling thread, and walks of the chroot for the largest node."""

    def __init__(self, hosts: str, client) -> None:
        self.hosts = hosts
        self.client = client
        self.peak_znodes = 0
        self.peak_data_bytes = 0
        self.samples = 0
        self.walks: list[Walk] = []
        self.flagged: dict[str, Node] = {}
        self._last_walk_nodes = 0
        self._last_walk_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_loop, name="mntr", daemon=True)
        self._lock = threading.Lock()
        self.error: str | None = None

    @property
    def largest(self) -> Node | None:
        sizes = [w.largest for w in self.walks if w.largest]
        return max(sizes, key=lambda node: node.size, default=None)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def sample(self) -> int:
        figures = read_mntr(self.hosts)
        count = int(figures["zk_znode_count"])
        data = int(figures.get("zk_approximate_data_size", 0))
        with self._lock:
            self.samples += 1
            self.peak_znodes = max(self.peak_znodes, count)
            self.peak_data_bytes = max(self.peak_data_bytes, data)
        return count

    def _sample_loop(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            try:
                count = self.sample()
                now = time.monotonic()
                if (
                    count >= self._last_walk_nodes * WALK_GROWTH
                    and now - self._last_walk_at >= WALK_EVERY
                ):
                    self.walk("during")
            except Exception as e:  # keep sampling: one refused connection is no reason to stop
                self.error = repr(e)

    def progress(self) -> dict:
        with self._lock:
            return {"znodes": self.peak_znodes, "zk_data_bytes": self.peak_data_bytes}

    def walk(self, label: str) -> Walk:
        """Every node of the chroot with its stat, level by level, many requests in flight."""
        self.sample()
        started = time.perf_counter()
        w = Walk(label)
        level = ["/"]
        while level:
            following = []
            for i in range(0, len(level), WALK_CONCURRENCY):
                chunk = level[i : i + WALK_CONCURRENCY]
                pending = [(p, self.client.get_children_async(p, include_data=True)) for p in chunk]
                for path, result in pending:
                    try:
                        children, stat = result.get()
                    except Exception:  # gone meanwhile (an ephemeral lock, a job moved on)
                        continue
                    self._visit(w, path, stat.dataLength, children)
                    following += [f"{path.rstrip('/')}/{c}" for c in children]
            level = following
        w.seconds = time.perf_counter() - started
        self._last_walk_nodes = max(w.nodes, self.peak_znodes)
        self._last_walk_at = time.monotonic()
        self.walks.append(w)
        emit(
            PART,
            event="walk",
            label=label,
            nodes=w.nodes,
            data_bytes=w.data_bytes,
            seconds=round(w.seconds, 2),
            largest=_pair(w.largest),
            largest_listing=_pair(w.largest_listing),
            flagged=[[f.path, f.size, f.why] for f in w.flagged],
        )
        return w

    def _visit(self, w: Walk, path: str, size: int, children: list[str]) -> None:
        w.nodes += 1
        w.data_bytes += size
        if w.largest is None or size > w.largest.size:
            w.largest = Node(path, size)
        # What a getChildren answer carries: each name with its 4-byte length.
        listing = sum(len(c) + 4 for c in children)
        if w.largest_listing is None or listing > w.largest_listing.size:
            w.largest_listing = Node(path, listing)
        why = _too_big(path, size)
        if why:
            node = Node(path, size, why)
            w.flagged.append(node)
            self.flagged[path] = node

    def report(self) -> None:
        largest = self.largest
        emit(
            PART,
            event="zookeeper",
            peak_znodes=self.peak_znodes,
            peak_data_bytes=self.peak_data_bytes,
            mntr_samples=self.samples,
            mntr_error=self.error,
            largest_node=None if largest is None else largest.path,
            largest_node_bytes=None if largest is None else largest.size,
            share_of_1mb_limit=None if largest is None else round(largest.size / ZK_NODE_LIMIT, 4),
            flagged=[[f.path, f.size, f.why] for f in self.flagged.values()],
        )


def _too_big(path: str, size: int) -> str:
    """Why a node of ``size`` bytes at ``path`` is too big to scale, or ``""``."""
    parts = path.strip("/").split("/")
    if size > ANY_NODE_LIMIT:
        return f"more than {ANY_NODE_LIMIT} bytes, a tenth of ZooKeeper's node limit"
    per_batch = len(parts) >= 3 and parts[0] == "batches" and parts[2] != "states"
    if per_batch and size > PER_BATCH_LIMIT:
        return f"a per-batch node above {PER_BATCH_LIMIT} bytes grows with the job count"
    return ""


def _pair(node: Node | None) -> list | None:
    return None if node is None else [node.path, node.size]
