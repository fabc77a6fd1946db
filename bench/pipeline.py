"""The whole pipeline: many small single-file jobs through every state with 2 worker processes.

Set-up (untimed), all under a fresh ``var/bench/tmp-pipeline-<uuid>`` removed at the end:

- ``BENCH_PIPELINE_N`` (default 1000) random 4 KiB files and an
  ``mrt-single-file-batch-manifest`` listing them (md5 and size of each), served by a
  threaded HTTP server on 127.0.0.1 in this process;
- an environment for the queue's processes: a fresh ZooKeeper chroot, the throw-away
  Redis (flushed first), SQLite, working, storage and minter directories under the temp
  dir; then ``manage.py migrate`` and a ``bench`` profile;
- the baseline: ``bench.zk``'s raw kazoo multi loop, ``BASELINE_MOVES`` moves on a chroot
  of its own, the median of ``BASELINE_ROUNDS`` rounds, after the same loop has run
  untimed until its rate settles (at most ``WARM_UP_MAX`` rounds): a fresh ZooKeeper runs
  at about half speed until its JVM has compiled its hot paths.

``run_dispatcher`` and 2 ``rqworker`` processes on every queue are started fresh and waited
for until they are up (the dispatcher dispatching, both workers registered): a running
queue has no start-up, and the time it takes is reported apart (``started``). Timed, from
just before the submission until the batch is seen Completed (polled every 0.2 s):
``manage.py submit`` of the manifest and every job through the queue. Each job
makes 9 transitions (Pending -> Estimating -> ... -> Notify -> Completed). ZooKeeper's zxid,
read with ``srvr`` before and after, counts the write transactions (a multi counts one, and
so does a refused write). JSON lines show the jobs per state every few seconds, the CPU
seconds of each process over the run, and the baseline measured again afterwards (the
machine's load may have moved; the summary keeps the one measured before).

Then the same once more with the processes run by ``bench/machinery.py``: every job step's
handler succeeds at once, so what is timed is the machinery around the handlers (the
dispatcher, an RQ job per job and state, a ZooKeeper lock, commit and re-check per step, the
batch's own steps, the mirror): the most any handlers could reach here.

Summary: ``jobs_per_s``, ``zk_writes_per_job``, ``zk_requests_per_job`` (``mntr``'s
packets received: reads, writes and pings of every process), ``baseline_per_s`` (raw multis per
second) and ``ratio = jobs_per_s * 9 / baseline_per_s``; the target is a ratio >= 0.25.
Then ``machinery_jobs_per_s`` and ``machinery_ratio``, the same with handlers that do nothing.
``cpu_ms_per_job`` and ``machinery_cpu_ms_per_job``: the CPU milliseconds per job of the
queue's processes (dispatcher, workers, ``manage.py submit``) and of ZooKeeper and Redis
over each timed run; less sensitive to the machine's other load than the rates.
"""

from __future__ import annotations

import statistics
import time

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
    zk_store,
)
from bench.cpu import CpuMeter, queue_cpu_seconds
from bench.zkwords import read_mntr, read_zxid

PART = "pipeline"
DEFAULT_N = 1000
FILE_SIZE = 4096
WORKERS = 2
BASELINE_MOVES = 2000
TRANSITIONS_PER_JOB = 9
MACHINERY = "bench/machinery.py"
TIMEOUT = 15 * 60.0
TARGET_RATIO = 0.25
# Even warm, one round of the loop can be a third off the next: the baseline is a median.
BASELINE_ROUNDS = 3
# The untimed warm-up stops once a round is less than 5 % faster than the one before.
WARM_UP_MAX = 8
WARM_UP_SETTLED = 0.05


def run(args) -> None:
    n = env_int(PART, "BENCH_PIPELINE_N", DEFAULT_N)
    with queue_run(PART, n, FILE_SIZE, n=n, workers=WORKERS) as queue:
        _warm_up()
        rounds = [_baseline() for _ in range(BASELINE_ROUNDS)]
        baseline = statistics.median(rounds)
        emit(
            PART,
            event="baseline",
            moves=BASELINE_MOVES,
            rounds=[round(r, 1) for r in rounds],
            baseline_per_s=round(baseline, 1),
        )
        seconds, writes, requests, cpu = _timed(queue, n)
        # The same loop once more (not in the summary): how far the machine's load moved.
        after = _baseline()
        emit(
            PART,
            event="baseline_after",
            baseline_per_s=round(after, 1),
            ratio_with_it=round(n / seconds * TRANSITIONS_PER_JOB / after, 3),
        )
        machinery_seconds, _, _, machinery_cpu = _timed(queue, n, MACHINERY)
    jobs_per_s = n / seconds
    ratio = jobs_per_s * TRANSITIONS_PER_JOB / baseline
    machinery_per_s = n / machinery_seconds
    if ratio < TARGET_RATIO:
        emit(PART, event="below_target", ratio=round(ratio, 3), target=TARGET_RATIO)
    summary(
        PART,
        jobs_per_s=jobs_per_s,
        zk_writes_per_job=writes / n,
        zk_requests_per_job=requests / n,
        baseline_per_s=baseline,
        ratio=ratio,
        n=n,
        machinery_jobs_per_s=machinery_per_s,
        machinery_ratio=machinery_per_s * TRANSITIONS_PER_JOB / baseline,
        cpu_ms_per_job=cpu * 1000 / n,
        machinery_cpu_ms_per_job=machinery_cpu * 1000 / n,
    )


def _warm_up() -> None:
    """Run the baseline's loop untimed until its rate settles.

    A fresh ZooKeeper's JVM compiles as it goes: its first few thousand writes run at about
    half the rate of later ones, and a baseline taken then would flatter every ratio.
    """
    rates: list[float] = []
    while len(rates) < WARM_UP_MAX and not (
        len(rates) >= 2 and rates[-1] < rates[-2] * (1 + WARM_UP_SETTLED)
    ):
        rates.append(_baseline())
    emit(PART, event="warm_up", baseline_per_s=[round(r, 1) for r in rates])


def _baseline() -> float:
    from bench.zk import raw_moves_per_s

    store, cleanup = zk_store(f"{PART}-baseline")
    try:
        return raw_moves_per_s(store.client, BASELINE_MOVES)
    finally:
        cleanup()


# --- the timed run ---------------------------------------------------------------------


def _timed(queue: QueueRun, n: int, script: str = "manage.py") -> tuple[float, int, int, float]:
    """Submit, start the queue, wait for the batch; (seconds, ZooKeeper write transactions,
    ZooKeeper requests of every kind, CPU seconds of the queue's processes and services:
    ``queue_cpu_seconds``)."""
    from merritt_queue.core.states import BatchStatus

    with queue_processes(PART, queue, script) as (store, procs):
        zxid_before = read_zxid(queue.hosts)
        packets_before = _packets(queue.hosts)
        meter = CpuMeter()
        bid, start = submit_and_start(PART, queue, procs, WORKERS, meter)
        batch, first_move = wait_batch(PART, store, bid, start, procs, TIMEOUT)
        seconds = time.perf_counter() - start
        zxid_after = read_zxid(queue.hosts)
        requests = _packets(queue.hosts) - packets_before
        cpu = report_finished(PART, store, batch, n, procs, meter, seconds, first_move)
        if batch.status != BatchStatus.COMPLETED:  # report_finished exits first; belt and braces
            raise SystemExit(f"bench {PART}: batch {bid} ended {batch.status}")
        return seconds, zxid_after - zxid_before, requests, queue_cpu_seconds(cpu)


def _packets(hosts: str) -> int:
    # Every request the server received: reads, writes and pings, the bench's own polling
    # of the batch too, which is small beside the queue's.
    return int(read_mntr(hosts)["zk_packets_received"])
