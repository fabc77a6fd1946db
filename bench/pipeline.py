"""The whole pipeline: many small single-file jobs through every state with 2 worker processes.

Set-up (untimed), all under a fresh ``var/bench/tmp-pipeline-<uuid>`` removed at the end:

- ``BENCH_PIPELINE_N`` (default 1000) random 4 KiB files and an
  ``mrt-single-file-batch-manifest`` listing them (md5 and size of each), served by a
  threaded HTTP server on 127.0.0.1 in this process;
- an environment for the queue's processes: a fresh ZooKeeper chroot, the throw-away
  Redis (flushed first), SQLite, working, storage and minter directories under the temp
  dir; then ``manage.py migrate`` and a ``bench`` profile;
- the baseline: ``bench.zk``'s raw kazoo multi loop, ``BASELINE_MOVES`` moves on a chroot
  of its own.

Timed, from just before the submission until the batch is seen Completed (polled every
0.2 s): ``manage.py submit`` of the manifest, then ``run_dispatcher`` and 2 ``rqworker``
processes on every queue, all started fresh (their start-up is inside the time). Each job
makes 9 transitions (Pending -> Estimating -> ... -> Notify -> Completed). ZooKeeper's zxid,
read with ``srvr`` before and after, counts the write transactions (a multi counts one, and
so does a refused write). JSON lines show the jobs per state every few seconds, the CPU
seconds of each process over the run, and the baseline measured again afterwards (the
machine's load may have moved; the summary keeps the one measured before).

Summary: ``jobs_per_s``, ``zk_writes_per_job``, ``baseline_per_s`` (raw multis per
second) and ``ratio = jobs_per_s * 9 / baseline_per_s``; the target is a ratio >= 0.25.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from .common import (
    BENCH_PROFILE_CODE,
    RESULTS_DIR,
    ContentServer,
    Processes,
    delete_chroot,
    emit,
    env_int,
    flush_redis,
    make_file_manifest,
    manage,
    own_cpu,
    queue_env,
    read_zxid,
    redis_url,
    service_cpu,
    submit_manifest,
    summary,
    verify_batch,
    wait_batch,
    zk_hosts,
    zk_store,
)

PART = "pipeline"
DEFAULT_N = 1000
FILE_SIZE = 4096
WORKERS = 2
BASELINE_MOVES = 2000
TRANSITIONS_PER_JOB = 9
TIMEOUT = 15 * 60.0
TARGET_RATIO = 0.25


def run(args) -> None:
    n = env_int(PART, "BENCH_PIPELINE_N", DEFAULT_N)
    hosts = zk_hosts()
    redis = redis_url(PART)
    tag = uuid.uuid4().hex
    tmp = RESULTS_DIR / f"tmp-{PART}-{tag}"
    chroot = f"/mq-bench-{PART}-{tag}"
    server = None
    try:
        tmp.mkdir(parents=True)
        emit(
            PART,
            event="config",
            n=n,
            file_size=FILE_SIZE,
            workers=WORKERS,
            tmp=str(tmp),
            loadavg=os.getloadavg(),
        )
        setup_start = time.perf_counter()
        server = ContentServer(tmp / "content")
        manifest_url = make_file_manifest(server, n, FILE_SIZE)
        env = queue_env(tmp, hosts, chroot, redis)
        flush_redis(redis)
        manage(PART, env, "migrate", "--verbosity", "0")
        manage(PART, env, "shell", "-c", BENCH_PROFILE_CODE)
        emit(PART, event="setup", seconds=round(time.perf_counter() - setup_start, 3))
        baseline = _baseline()
        emit(PART, event="baseline", moves=BASELINE_MOVES, baseline_per_s=round(baseline, 1))
        seconds, writes = _timed(env, tmp, hosts, chroot, manifest_url, n)
        # The same loop once more (not in the summary): how far the machine's load moved.
        after = _baseline()
        emit(
            PART,
            event="baseline_after",
            baseline_per_s=round(after, 1),
            ratio_with_it=round(n / seconds * TRANSITIONS_PER_JOB / after, 3),
        )
    finally:
        if server is not None:
            server.stop()
        delete_chroot(PART, hosts, chroot)
        shutil.rmtree(tmp, ignore_errors=True)
    jobs_per_s = n / seconds
    ratio = jobs_per_s * TRANSITIONS_PER_JOB / baseline
    if ratio < TARGET_RATIO:
        emit(PART, event="below_target", ratio=round(ratio, 3), target=TARGET_RATIO)
    summary(
        PART,
        jobs_per_s=jobs_per_s,
        zk_writes_per_job=writes / n,
        baseline_per_s=baseline,
        ratio=ratio,
        n=n,
    )


def _baseline() -> float:
    from .zk import raw_moves_per_s

    store, cleanup = zk_store(f"{PART}-baseline")
    try:
        return raw_moves_per_s(store.client, BASELINE_MOVES)
    finally:
        cleanup()


# --- the timed run ---------------------------------------------------------------------


def _timed(
    env: dict[str, str], tmp: Path, hosts: str, chroot: str, manifest_url: str, n: int
) -> tuple[float, int]:
    """Submit, start the queue, wait for the batch; (seconds, ZooKeeper write transactions)."""
    from merritt_queue.dispatcher import all_queue_names
    from merritt_queue.states import BatchStatus
    from merritt_queue.store import QueueStore
    from merritt_queue.zk import ZkConfig, connect

    client = connect(ZkConfig(hosts=hosts, chroot=chroot))
    store = QueueStore(client)
    procs = Processes(PART, tmp / "logs", env)
    try:
        zxid_before = read_zxid(hosts)
        services_cpu = service_cpu()
        own_before = own_cpu()
        start = time.perf_counter()
        bid = submit_manifest(PART, env, manifest_url)
        submitted = time.perf_counter() - start
        procs.start("dispatcher", "run_dispatcher")
        for i in range(1, WORKERS + 1):
            procs.start(f"worker{i}", "rqworker", *all_queue_names())
        emit(PART, event="submitted", bid=bid, submit_s=round(submitted, 3), pids=procs.pids())
        batch, first_move = wait_batch(PART, store, bid, start, procs, TIMEOUT)
        seconds = time.perf_counter() - start
        zxid_after = read_zxid(hosts)
        cpu = procs.cpu() | {
            name: round(after - services_cpu[name], 2)
            for name, after in service_cpu().items()
            if name in services_cpu
        }
        own_after = own_cpu()
        cpu["bench"] = round(own_after[0] - own_before[0], 2)
        cpu["submit"] = round(own_after[1] - own_before[1], 2)
        emit(PART, event="cpu_seconds", wall=round(seconds, 2), cores=os.cpu_count(), **cpu)
        emit(
            PART,
            event="finished",
            status=batch.status,
            seconds=round(seconds, 3),
            first_job_moved_s=None if first_move is None else round(first_move, 3),
            loadavg=os.getloadavg(),
            message=batch.message,
        )
        verify_batch(PART, store, batch, n, procs)
        if batch.status != BatchStatus.COMPLETED:  # verify_batch raises first; belt and braces
            raise SystemExit(f"bench {PART}: batch {bid} ended {batch.status}")
        return seconds, zxid_after - zxid_before
    finally:
        procs.stop_all()
        client.stop()
        client.close()
