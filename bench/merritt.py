"""The same small single-file batch in ``local`` mode and in ``merritt-queue`` mode, side
by side: what handing Storing and Recording to Merritt's storage and inventory costs
ZooKeeper per job.

Set-up (untimed) is ``pipeline``'s (``bench.common.queue_run``): ``BENCH_MERRITT_N``
(default 200) random 4 KiB files and a single-file-batch manifest of them on a local HTTP
server, a fresh chroot, Redis flushed, SQLite migrated, a ``bench`` profile. Both runs use
one environment: the web tier (``manage.py runserver --noreload``: one threaded process,
whose CPU is counted whole, on a free 127.0.0.1 port) runs in both, and every process has
``MQ_CONTENT_BASE_URL`` set to it. The web process idles in ``local`` mode; in
``merritt-queue`` mode Merritt storage fetches each job's signed add-manifest and files
from it.

1. ``local``: the dispatcher and 2 workers store and record themselves.
2. ``merritt-queue``: the profile is switched (storage node 9501, ``store_record``), and
   Merritt's storage and inventory consumers (``bench.replays``, in threads of this
   process, each on its own ZooKeeper session) take the jobs in Storing and Recording.

Each run is timed from the submission until the batch is Completed, as ``pipeline``'s.
``zk_writes_per_job``: ZooKeeper's zxid delta over the run per job; ``zk_requests_per_job``:
``mntr``'s packets received over the run per job (reads, writes and pings of every
session: the queue's processes, the web tier, the bench's own polling and, in
``merritt-queue`` mode, the replays). The replays' own requests and writes are also
counted on their clients (``replay_requests_per_job``, ``replay_writes_per_job``; their
pings are not) so the queue's share can be read apart. ``cpu_ms_per_job``: the queue's
processes, the web tier, ZooKeeper and Redis; the replays run in the bench's process and
are left out. ``local`` runs first on the run's fresh ZooKeeper: its rate may be the lower
for it; the counts per job are not.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from contextlib import ExitStack

from bench.common import (
    QueueRun,
    emit,
    env_int,
    manage,
    queue_processes,
    queue_run,
    report_finished,
    submit_and_start,
    summary,
    wait_batch,
)
from bench.cpu import CpuMeter, queue_cpu_seconds
from bench.replays import NODE, replays, storage_state
from bench.zkwords import read_mntr, read_zxid
from harness import procs as harness_procs
from harness.merrittstore import MerrittStore

PART = "merritt"
DEFAULT_N = 200
FILE_SIZE = 4096
WORKERS = 2
TIMEOUT = 10 * 60.0
MODES = ("local", "merritt-queue")
PROFILE_CODE = (
    "from batches.models import Profile; "
    "Profile.objects.filter(name='bench').update(storage_node={node!r}, store_record={mode!r})"
)


def run(args) -> None:
    n = env_int(PART, "BENCH_MERRITT_N", DEFAULT_N)
    figures: dict[str, float] = {"n": n}
    with (
        queue_run(PART, n, FILE_SIZE, n=n, workers=WORKERS, modes=MODES) as queue,
        storage_state(queue.tmp / "storage-state") as state,
    ):
        port = _free_port()
        queue.env["MQ_CONTENT_BASE_URL"] = f"http://127.0.0.1:{port}"
        # Our Notify of a merritt-queue job reads there the version storage made.
        queue.env["MERRITT_STORAGE_URL"] = state.url
        # No TLS proxy stands in front of the run's web tier: storage fetches plain HTTP.
        queue.env["SECURE_SSL_REDIRECT"] = "false"
        for mode in MODES:
            manage(PART, queue.env, "shell", "-c", PROFILE_CODE.format(node=str(NODE), mode=mode))
            result = _timed(queue, state, n, port, mode)
            emit(PART, event="mode", mode=mode, **{k: round(v, 3) for k, v in result.items()})
            prefix = mode.replace("-", "_")
            figures |= {
                f"{prefix}_{k}": v
                for k, v in result.items()
                if mode != "local" or not k.startswith("replay_")
            }
    summary(PART, **figures)


def _timed(queue: QueueRun, state: MerrittStore, n: int, port: int, mode: str) -> dict[str, float]:
    """One batch through the queue in ``mode``; its figures per job."""
    from merritt_queue.core.states import BatchStatus
    from merritt_queue.core.zk import ZkConfig, connect

    with queue_processes(PART, queue) as (store, procs), ExitStack() as stack:
        _start_web(procs, port)
        rep = None
        if mode != "local":
            rep = stack.enter_context(
                replays(lambda: connect(ZkConfig(hosts=queue.hosts, chroot=queue.chroot)), state)
            )
        zxid_before = read_zxid(queue.hosts)
        packets_before = _packets(queue.hosts)
        counted_before = rep.counts() if rep else (0, 0)
        meter = CpuMeter()
        bid, start = submit_and_start(PART, queue, procs, WORKERS, meter)
        batch, first_move = wait_batch(
            PART, store, bid, start, procs, TIMEOUT, on_progress=rep.check if rep else None
        )
        seconds = time.perf_counter() - start
        writes = read_zxid(queue.hosts) - zxid_before
        requests = _packets(queue.hosts) - packets_before
        counted = rep.counts() if rep else (0, 0)
        if rep:
            emit(PART, event="replay_requests", **rep.kinds())
        replay_requests, replay_writes = (
            a - b for a, b in zip(counted, counted_before, strict=True)
        )
        cpu = report_finished(PART, store, batch, n, procs, meter, seconds, first_move)
        if batch.status != BatchStatus.COMPLETED:
            raise SystemExit(f"bench {PART}: batch {bid} ended {batch.status}")
        if rep and rep.check() != {"stored": n, "recorded": n}:
            raise SystemExit(f"bench {PART}: the replays took {rep.check()}, not {n} each")
    return {
        "jobs_per_s": n / seconds,
        "zk_writes_per_job": writes / n,
        "zk_requests_per_job": requests / n,
        "replay_writes_per_job": replay_writes / n,
        "replay_requests_per_job": replay_requests / n,
        "cpu_ms_per_job": queue_cpu_seconds(cpu) * 1000 / n,
    }


def _start_web(procs, port: int) -> None:
    """The web app on ``port``, answering: ``runserver`` without its reloader, one process
    (threaded), so that ``cpu_seconds`` counts all of the web tier's CPU."""
    procs.start("web", "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}/healthz"

    def answers() -> bool:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200

    harness_procs.wait_for(
        "the web tier", answers, procs, timeout=60, all_alive=True, ignoring=(OSError,)
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _packets(hosts: str) -> int:
    return int(read_mntr(hosts)["zk_packets_received"])
