"""Helpers shared by every benchmark part: output, figures, timing, a ZooKeeper store.

Each part prints JSON lines (``emit``) while it runs and exactly one summary
line ``bench <part> key=value ...`` at the end (``summary``), whose figures are
also written to ``var/bench/<part>.json`` at the repository root.

The second half serves the parts that run the whole queue as real processes
(``pipeline``, ``scale``): the untimed set-up of such a run (``queue_run``: a content
server with a manifest of random files, the processes' environment and database), the
process group, the timed submission and start, CPU accounting, waiting for and checking
the batch, and ZooKeeper's four-letter words. Starting, waiting and stopping, the
environment, the chroot and which Redis may be flushed are the harness's (``harness``), as
for the tests; the bench adds its own sessions, profiling and CPU accounting on top.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cpu import CpuMeter, cpu_seconds
from harness import env as harness_env
from harness import procs as harness_procs
from harness import zookeeper
from harness.procs import REPO as REPO_ROOT
from harness.redisdb import foreign_keys

if TYPE_CHECKING:
    from merritt_queue.core.store import QueueStore

RESULTS_DIR = REPO_ROOT / "var" / "bench"


def emit(part: str, **fields) -> None:
    """Print one JSON line ``{"part": part, ...fields}`` and flush it."""
    print(json.dumps({"part": part, **fields}, default=str), flush=True)


def _format(value: int | float) -> str:
    return str(value) if isinstance(value, int) else f"{value:.3f}"


def summary(part: str, **numbers: int | float) -> None:
    """Print ``bench <part> key=value ...`` and write the figures to ``var/bench/<part>.json``."""
    for key, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"bench {part}: summary figure {key}={value!r} is not a number")
    line = " ".join([f"bench {part}", *(f"{k}={_format(v)}" for k, v in numbers.items())])
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{part}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"part": part, **numbers}, indent=2) + "\n")
    tmp.replace(path)
    print(line, flush=True)


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) of ``values``, interpolating linearly between ranks."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be from 0 to 100, not {p}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class Timer:
    """Wall-clock seconds since the ``timer()`` block started, final once it has ended."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.end: float | None = None

    @property
    def elapsed(self) -> float:
        return (self.end if self.end is not None else time.perf_counter()) - self.start


@contextmanager
def timer() -> Iterator[Timer]:
    """``with timer() as t: ...`` then ``t.elapsed`` (``time.perf_counter`` seconds)."""
    t = Timer()
    try:
        yield t
    finally:
        t.end = time.perf_counter()


def env_int(part: str, name: str, default: int) -> int:
    """The whole number in environment variable ``name`` (at least 1), or ``default`` if unset."""
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SystemExit(f"bench {part}: {name}={text!r} is not a whole number") from None
    if value < 1:
        raise SystemExit(f"bench {part}: {name} must be at least 1, not {value}")
    return value


def zk_hosts() -> str:
    hosts = os.environ.get("ZK_HOSTS")
    if not hosts:
        raise SystemExit(
            "bench: ZK_HOSTS is not set; run `scripts/services.sh with-test-services "
            "python -m bench`, or export ZK_HOSTS=host:port of a throw-away ZooKeeper"
        )
    return hosts


def zk_store(prefix: str) -> tuple[QueueStore, Callable[[], None]]:
    """A ``QueueStore`` on a fresh chroot ``/mq-bench-<prefix>-<uuid>`` and its cleanup.

    Returns ``(store, cleanup)``; ``cleanup()`` stops the store's client and
    deletes the whole chroot with a client on the root. Call it in a ``finally``.
    """
    from merritt_queue.core.store import QueueStore
    from merritt_queue.core.zk import ZkConfig, connect

    hosts = zk_hosts()
    chroot = zookeeper.fresh_chroot(f"mq-bench-{prefix}")
    client = connect(ZkConfig(hosts=hosts, chroot=chroot))
    store = QueueStore(client)

    def cleanup() -> None:
        try:
            client.stop()
            client.close()
        except Exception as e:  # a dead client must not keep the chroot from going
            print(f"bench: closing the {prefix} client failed: {e!r}", file=sys.stderr)
        zookeeper.delete_chroot(hosts, chroot, "bench")

    return store, cleanup


# --- the whole queue as processes (pipeline, scale) ----------------------------------

FILE_MANIFEST_HEADER = (
    "#%checkm_0.7\n"
    "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest\n"
    "#%prefix | mrt: | http://merritt.cdlib.org/terms#\n"
    "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n"
    "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize "
    "| nfo:fileLastModified | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier "
    "| mrt:creator | mrt:title | mrt:date\n"
)
MANIFEST_NAME = "bench-files.checkm"
BENCH_PROFILE_CODE = (
    "from batches.models import Profile; "
    "Profile.objects.create(name='bench', collection='bench', minter_shoulder='ark:/99999/fk4')"
)
BENCH_SECRET_KEY = "bench-only-" + "k" * 50


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass


class ContentServer:
    """Files of ``root`` over HTTP on 127.0.0.1, from a thread of this process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True)
        handler = functools.partial(_QuietHandler, directory=str(root))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def make_file_manifest(server: ContentServer, n: int, size: int) -> str:
    """``n`` random files of ``size`` bytes and a single-file-batch manifest of them; its URL."""
    from merritt_queue.deposit.manifest import parse_manifest

    rows = []
    for i in range(n):
        name = f"file-{i:06d}.bin"
        data = os.urandom(size)
        (server.root / name).write_bytes(data)
        md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
        rows.append(
            f"{server.url}/{name} | md5 | {md5} | {size} |  | {name} |  |  "
            f"| bench | bench file {i} | 2024-01-01\n"
        )
    text = FILE_MANIFEST_HEADER + "".join(rows) + "#%eof\n"
    parse_manifest(text)  # a bad manifest fails here, not after minutes of polling
    (server.root / MANIFEST_NAME).write_text(text)
    return f"{server.url}/{MANIFEST_NAME}"


def redis_url(part: str) -> str:
    url = os.environ.get("REDIS_URL")
    if not url:
        raise SystemExit(
            f"bench {part}: REDIS_URL is not set; run `make bench BENCH={part}`, or export "
            "REDIS_URL of a throw-away Redis (its database is flushed)"
        )
    return url


def queue_env(tmp: Path, hosts: str, chroot: str, redis: str) -> dict[str, str]:
    """The environment of the queue's processes: everything of theirs under ``tmp``."""
    return harness_env.queue_env(
        tmp,
        database_url=f"sqlite:///{tmp.resolve()}/db.sqlite3",
        zk_hosts=hosts,
        chroot=chroot,
        redis_url=redis,
        secret_key=BENCH_SECRET_KEY,
        DJANGO_SETTINGS_MODULE="merritt_queue.project.settings",
        # As deployed (deploy/env.example): DEBUG keeps every SQL query in memory.
        DEBUG="false",
        EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
    )


def flush_redis(part: str, url: str) -> None:
    """Empty the run's Redis database, unless it holds keys and is not the harness's own."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = foreign_keys(client, url)
        if keys:
            raise SystemExit(
                f"bench {part}: REDIS_URL holds {keys} key{'s' if keys != 1 else ''} and is not "
                "the Redis that `make bench` started (MQ_TEST_REDIS_URL): the bench empties "
                "its database, so it refuses this one. Run `make bench`, or point REDIS_URL "
                "at an empty database."
            )
        client.flushdb()
    finally:
        client.close()


def manage(part: str, env: dict[str, str], *argv: str) -> str:
    """Run ``manage.py argv`` to the end; its stdout, or exit showing its output."""
    try:
        return harness_procs.manage(env, *argv, timeout=300)
    except harness_procs.CommandFailed as e:
        raise SystemExit(f"bench {part}: {e}") from None


def submit_manifest(part: str, env: dict[str, str], manifest_url: str) -> str:
    """Submit the manifest as one batch of the ``bench`` profile; the batch id."""
    out = manage(
        part,
        env,
        "submit",
        "--profile=bench",
        "--submitter=bench",
        "--type=single-file-batch-manifest",
        f"--payload-url={manifest_url}",
    )
    return out.split()[0]


class Processes(harness_procs.Procs):
    """The queue's processes of one run, each in its own session (a Ctrl-C reaches the bench
    only; it stops them), optionally under cProfile."""

    def __init__(
        self, part: str, log_dir: Path, env: dict[str, str], script: str = "manage.py"
    ) -> None:
        super().__init__(env, log_dir, new_session=True, label=f"bench {part}", script=script)
        self.part = part

    def start(self, name: str, *argv: str, **env: str) -> subprocess.Popen:
        """``python argv``, as the harness starts it. BENCH_PROFILE_DIR: each process runs
        under cProfile and leaves <logs dir>-<name>.pstats there when it stops (SIGTERM ends
        the queue's processes normally, so the stats are written); BENCH_PROFILE_CLOCK=cpu
        times it by the main thread's CPU instead of the wall clock (``bench.profiled``)."""
        profile_dir = os.environ.get("BENCH_PROFILE_DIR")
        stats = f"{profile_dir}/{self.root.name}-{name}.pstats"
        by_cpu = os.environ.get("BENCH_PROFILE_CLOCK") == "cpu"
        profiler = ["-m", "bench.profiled", stats] if by_cpu else ["-m", "cProfile", "-o", stats]
        runner = profiler if profile_dir else []
        return super().start(name, *runner, *argv, **env)

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) each process has used so far."""
        used = {name: cpu_seconds(pid) for name, pid in self.pids().items()}
        return {name: round(s, 2) for name, s in used.items() if s is not None}

    def show_logs(self, lines: int = 30) -> None:
        print(self.logs(lines), file=sys.stderr, flush=True)


@dataclass
class QueueRun:
    """What the set-up of a whole-queue run made: where its processes and files live."""

    hosts: str
    chroot: str
    tmp: Path
    env: dict[str, str]
    manifest_url: str


CAPACITY_DEFAULTS = {
    "MQ_MAX_BATCH_JOBS": 10_000,
    "MQ_MAX_COLLECTION_JOBS": 10_000,
    "MQ_MAX_QUEUE_JOBS": 25_000,
}


@contextmanager
def queue_run(part: str, n: int, file_size: int, /, **config) -> Iterator[QueueRun]:
    """The untimed set-up of a run of the whole queue, all of it removed at the end.

    A fresh ``var/bench/tmp-<part>-<uuid>`` with ``n`` random files of ``file_size`` bytes
    served from 127.0.0.1 and their manifest, a fresh chroot, the Redis flushed, the SQLite
    mirror migrated with a ``bench`` profile. ``config`` goes into the ``config`` line.
    """
    hosts = zk_hosts()
    redis = redis_url(part)
    chroot = zookeeper.fresh_chroot(f"mq-bench-{part}")
    tmp = RESULTS_DIR / f"tmp-{chroot.removeprefix('/mq-bench-')}"
    server = None
    try:
        tmp.mkdir(parents=True)
        emit(
            part,
            event="config",
            **config,
            file_size=file_size,
            tmp=str(tmp),
            loadavg=os.getloadavg(),
        )
        setup_start = time.perf_counter()
        server = ContentServer(tmp / "content")
        manifest_url = make_file_manifest(server, n, file_size)
        env = queue_env(tmp, hosts, chroot, redis)
        # The run is one batch of n jobs in one collection: the capacity limits (defaults as
        # in merritt_queue/project/settings.py) must let it in; make bench gives ZooKeeper its
        # own heap.
        for name, default in CAPACITY_DEFAULTS.items():
            env[name] = str(max(n, int(env.get(name, default))))
        # All its files come from one local server, which stands for many depositors' hosts:
        # every worker may download from it at once (MQ_MAX_DOWNLOADS_PER_HOST).
        env.setdefault("MQ_MAX_DOWNLOADS_PER_HOST", str(config.get("workers", 0)))
        flush_redis(part, redis)
        manage(part, env, "migrate", "--verbosity", "0")
        manage(part, env, "shell", "-c", BENCH_PROFILE_CODE)
        emit(part, event="setup", seconds=round(time.perf_counter() - setup_start, 3))
        yield QueueRun(hosts, chroot, tmp, env, manifest_url)
    finally:
        if server is not None:
            server.stop()
        zookeeper.delete_chroot(hosts, chroot, f"bench {part}")
        if os.environ.get("BENCH_KEEP"):  # the mirror's events and the logs, to look into
            emit(part, event="kept", tmp=str(tmp))
        else:
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def queue_processes(
    part: str, run: QueueRun, script: str = "manage.py"
) -> Iterator[tuple[QueueStore, Processes]]:
    """A store on the run's chroot and the (not yet started) processes, both ended after;
    ``script`` runs them (``bench/machinery.py``: with handlers that do nothing)."""
    from merritt_queue.core.store import QueueStore
    from merritt_queue.core.zk import ZkConfig, connect

    client = connect(ZkConfig(hosts=run.hosts, chroot=run.chroot))
    procs = Processes(part, run.tmp / f"logs-{Path(script).stem}", run.env, script)
    try:
        yield QueueStore(client), procs
    finally:
        procs.stop_all()
        client.stop()
        client.close()


def submit_and_start(
    part: str, run: QueueRun, procs: Processes, workers: int, meter: CpuMeter | None = None
) -> tuple[str, float]:
    """Start the dispatcher and ``workers`` workers on every queue, wait until they are up,
    then submit the manifest; (batch id, ``perf_counter`` at the start: the submission is
    timed, the processes' start-up is not, as a running queue has none). ``meter`` then
    counts the processes' CPU from the start on."""

    up = time.perf_counter()
    procs.dispatcher()
    for i in range(1, workers + 1):
        procs.worker(f"worker{i}")
    _wait_until_up(part, run, procs, workers)
    emit(part, event="started", seconds=round(time.perf_counter() - up, 3), pids=procs.pids())
    if meter is not None:
        meter.start_processes(procs)
    start = time.perf_counter()
    bid = submit_manifest(part, run.env, run.manifest_url)
    emit(part, event="submitted", bid=bid, submit_s=round(time.perf_counter() - start, 3))
    return bid, start


def _wait_until_up(part: str, run: QueueRun, procs: Processes, workers: int) -> None:
    """Until the dispatcher has begun dispatching and every worker is registered in Redis."""
    import redis
    from rq import Worker

    client = redis.Redis.from_url(run.env["REDIS_URL"])

    def up() -> bool:
        return "dispatching to" in procs.log("dispatcher") and (
            Worker.count(connection=client) >= workers
        )

    try:
        harness_procs.wait_for("the queue's processes", up, procs, timeout=120, all_alive=True)
    except AssertionError:
        procs.show_logs()
        dead = ", ".join(procs.exited()) or "none exited"
        raise SystemExit(f"bench {part}: the queue's processes did not start ({dead})") from None
    finally:
        client.close()


def report_finished(
    part: str,
    store,
    batch,
    n: int,
    procs: Processes,
    meter: CpuMeter,
    seconds: float,
    first_move: float | None,
) -> dict[str, float]:
    """The ``cpu_seconds`` and ``finished`` lines; then exit unless all ``n`` jobs completed.
    Returns the CPU seconds of each (``CpuMeter.used``)."""
    cpu = meter.used(procs)
    emit(part, event="cpu_seconds", wall=round(seconds, 2), cores=os.cpu_count(), **cpu)
    emit(
        part,
        event="finished",
        bid=batch.bid,
        status=batch.status,
        seconds=round(seconds, 3),
        first_job_moved_s=None if first_move is None else round(first_move, 3),
        loadavg=os.getloadavg(),
        message=batch.message,
    )
    verify_batch(part, store, batch, n, procs)
    return cpu


def wait_batch(
    part: str,
    store,
    bid: str,
    start: float,
    procs: Processes,
    timeout: float,
    *,
    poll: float = 0.2,
    progress_every: float = 3.0,
    on_progress: Callable[[], dict] | None = None,
):
    """Poll the batch until it is final; (batch, seconds until the first job left Pending).

    Every ``progress_every`` seconds a JSON line gives the jobs per state, plus what
    ``on_progress()`` returns. A queue process that exits, or ``timeout`` seconds
    after ``start``, ends the run with the processes' logs.
    """
    from merritt_queue.core.states import BatchStatus

    final = {BatchStatus.COMPLETED, BatchStatus.FAILED}
    next_progress = start + progress_every
    first_move = None
    while True:
        batch = store.batches.get_batch(bid)
        now = time.perf_counter()
        if batch.status in final:
            return batch, first_move
        if first_move is None or now >= next_progress:
            counts = state_counts(store.client)
            if first_move is None and any(c for s, c in counts.items() if s != "pending"):
                first_move = now - start
            if now >= next_progress:
                extra = on_progress() if on_progress else {}
                emit(
                    part,
                    event="progress",
                    elapsed_s=round(now - start, 1),
                    batch=batch.status,
                    jobs=counts,
                    **extra,
                )
                next_progress = now + progress_every
        dead = procs.exited()
        if dead:
            procs.show_logs()
            raise SystemExit(f"bench {part}: {', '.join(dead)} exited while the batch was running")
        if now - start > timeout:
            procs.show_logs()
            raise SystemExit(
                f"bench {part}: batch {bid} is still {batch.status} after {timeout:g} s; "
                f"jobs by state: {state_counts(store.client)}"
            )
        time.sleep(poll)


def state_counts(client) -> dict[str, int]:
    """How many index entries each ``/jobs/states/<state>`` directory holds."""
    from merritt_queue.core import tree as t

    names = sorted(client.get_children(t.JOB_STATES))
    stats = [client.exists_async(f"{t.JOB_STATES}/{s}") for s in names]
    counts = {}
    for name, result in zip(names, stats, strict=True):
        stat = result.get()
        counts[name] = stat.numChildren if stat else 0
    return counts


def verify_batch(part: str, store, batch, n: int, procs: Processes) -> None:
    """Exit with the failures shown unless all ``n`` jobs of the batch completed."""
    jobs = store.batches.batch_jobs(batch.bid)
    completed = len(jobs["batch-completed"])
    if completed == n:
        return
    failed = jobs["batch-failed"]
    emit(
        part,
        event="failure",
        batch=batch.status,
        batch_message=batch.message,
        completed=completed,
        failed=len(failed),
        other={k: len(v) for k, v in jobs.items() if k not in ("batch-completed", "batch-failed")},
    )
    for jid in failed[:5]:
        job = store.jobs.get_job(jid)
        print(f"bench {part}: {jid} failed after {job.last_successful_status}: {job.message}")
    procs.show_logs()
    raise SystemExit(f"bench {part}: {completed} of {n} jobs completed (batch {batch.status})")


def ran_in_own_process(part: str, module: str) -> bool:
    """Run ``python -m module`` instead when another part already set Django up in this
    process (on its own database); whether it did."""
    from django.conf import settings

    if not settings.configured:
        return False
    done = subprocess.run([sys.executable, "-m", module], cwd=REPO_ROOT)
    if done.returncode:
        raise SystemExit(f"bench {part}: failed (exit {done.returncode})")
    return True
