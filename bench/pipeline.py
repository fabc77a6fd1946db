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

import functools
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .common import (
    REPO_ROOT,
    RESULTS_DIR,
    delete_tree,
    emit,
    env_int,
    summary,
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
POLL = 0.2
PROGRESS_EVERY = 3.0
STOP_GRACE = 10.0
TARGET_RATIO = 0.25
MANIFEST_HEADER = (
    "#%checkm_0.7\n"
    "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest\n"
    "#%prefix | mrt: | http://merritt.cdlib.org/terms#\n"
    "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n"
    "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize "
    "| nfo:fileLastModified | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier "
    "| mrt:creator | mrt:title | mrt:date\n"
)
MANIFEST_NAME = "bench-files.checkm"
PROFILE_CODE = (
    "from batches.models import Profile; "
    "Profile.objects.create(name='bench', collection='bench', minter_shoulder='ark:/99999/fk4')"
)


def run(args) -> None:
    n = env_int(PART, "BENCH_PIPELINE_N", DEFAULT_N)
    hosts = zk_hosts()
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        raise SystemExit(
            f"bench {PART}: REDIS_URL is not set; run `make bench BENCH={PART}`, or export "
            "REDIS_URL of a throw-away Redis (its database is flushed)"
        )
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
        manifest_url = _make_content(server, n)
        env = _queue_env(tmp, hosts, chroot, redis_url)
        _flush_redis(redis_url)
        _manage(env, "migrate", "--verbosity", "0")
        _manage(env, "shell", "-c", PROFILE_CODE)
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
        _delete_chroot(hosts, chroot)
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


# --- set-up --------------------------------------------------------------------------


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


def _make_content(server: ContentServer, n: int) -> str:
    """``n`` random files and the manifest listing them; the manifest's URL."""
    from merritt_queue.manifest import parse_manifest

    rows = []
    for i in range(n):
        name = f"file-{i:06d}.bin"
        data = os.urandom(FILE_SIZE)
        (server.root / name).write_bytes(data)
        md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
        rows.append(
            f"{server.url}/{name} | md5 | {md5} | {FILE_SIZE} |  | {name} |  |  "
            f"| bench | bench file {i} | 2024-01-01\n"
        )
    text = MANIFEST_HEADER + "".join(rows) + "#%eof\n"
    parse_manifest(text)  # a bad manifest fails here, not after minutes of polling
    (server.root / MANIFEST_NAME).write_text(text)
    return f"{server.url}/{MANIFEST_NAME}"


def _queue_env(tmp: Path, hosts: str, chroot: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "merritt_queue.settings",
            "ZK_HOSTS": hosts,
            "ZK_CHROOT": chroot,
            "REDIS_URL": redis_url,
            "DATABASE_URL": f"sqlite:///{tmp.resolve()}/db.sqlite3",
            "MQ_WORK_DIR": str(tmp / "work"),
            "MQ_STORAGE_ROOT": str(tmp / "storage"),
            "MQ_MINTER_DIR": str(tmp / "minter"),
            "MQ_ALLOW_LOOPBACK": "true",
            "MQ_SWEEP_SECONDS": "1",
            "MQ_DISPATCH_AHEAD": "50",
            "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def _flush_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def _manage(env: dict[str, str], *argv: str) -> str:
    """Run ``manage.py argv`` to the end; its stdout, or exit showing its output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"bench {PART}: manage.py {argv[0]} failed (exit {done.returncode}):\n"
            f"{done.stdout}{done.stderr}"
        )
    return done.stdout


def _baseline() -> float:
    from .zk import raw_moves_per_s

    store, cleanup = zk_store(f"{PART}-baseline")
    try:
        return raw_moves_per_s(store.client, BASELINE_MOVES)
    finally:
        cleanup()


def _delete_chroot(hosts: str, chroot: str) -> None:
    from merritt_queue.zk import ZkConfig, connect

    try:
        root = connect(ZkConfig(hosts=hosts))
    except Exception as e:  # the run's own error matters more than the leftover chroot
        print(f"bench {PART}: could not remove {chroot}: {e!r}", file=sys.stderr)
        return
    try:
        delete_tree(root, chroot)
    finally:
        root.stop()
        root.close()


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
    procs = Processes(tmp / "logs", env)
    try:
        zxid_before = read_zxid(hosts)
        services_cpu = _service_cpu()
        own_cpu = _own_cpu()
        start = time.perf_counter()
        out = _manage(
            env,
            "submit",
            "--profile=bench",
            "--submitter=bench",
            "--type=single-file-batch-manifest",
            f"--payload-url={manifest_url}",
        )
        bid = out.split()[0]
        submitted = time.perf_counter() - start
        procs.start("dispatcher", "run_dispatcher")
        for i in range(1, WORKERS + 1):
            procs.start(f"worker{i}", "rqworker", *all_queue_names())
        emit(PART, event="submitted", bid=bid, submit_s=round(submitted, 3), pids=procs.pids())
        batch, first_move = _wait(store, bid, start, procs)
        seconds = time.perf_counter() - start
        zxid_after = read_zxid(hosts)
        cpu = procs.cpu() | {
            name: round(after - services_cpu[name], 2)
            for name, after in _service_cpu().items()
            if name in services_cpu
        }
        own_after = _own_cpu()
        cpu["bench"] = round(own_after[0] - own_cpu[0], 2)
        cpu["submit"] = round(own_after[1] - own_cpu[1], 2)
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
        _verify(store, batch, n, procs)
        if batch.status != BatchStatus.COMPLETED:  # _verify raises first; belt and braces
            raise SystemExit(f"bench {PART}: batch {bid} ended {batch.status}")
        return seconds, zxid_after - zxid_before
    finally:
        procs.stop_all()
        client.stop()
        client.close()


def _wait(store, bid: str, start: float, procs: Processes):
    """Poll the batch until it is final; (batch, seconds until the first job left Pending)."""
    from merritt_queue.states import BatchStatus

    final = {BatchStatus.COMPLETED, BatchStatus.FAILED}
    next_progress = start + PROGRESS_EVERY
    first_move = None
    while True:
        batch = store.get_batch(bid)
        now = time.perf_counter()
        if batch.status in final:
            return batch, first_move
        if first_move is None or now >= next_progress:
            counts = state_counts(store.client)
            if first_move is None and any(c for s, c in counts.items() if s != "pending"):
                first_move = now - start
            if now >= next_progress:
                emit(
                    PART,
                    event="progress",
                    elapsed_s=round(now - start, 1),
                    batch=batch.status,
                    jobs=counts,
                )
                next_progress = now + PROGRESS_EVERY
        dead = procs.dead()
        if dead:
            procs.show_logs()
            raise SystemExit(f"bench {PART}: {', '.join(dead)} exited while the batch was running")
        if now - start > TIMEOUT:
            procs.show_logs()
            raise SystemExit(
                f"bench {PART}: batch {bid} is still {batch.status} after {TIMEOUT:g} s; "
                f"jobs by state: {state_counts(store.client)}"
            )
        time.sleep(POLL)


def state_counts(client) -> dict[str, int]:
    """How many index entries each ``/jobs/states/<state>`` directory holds."""
    from merritt_queue import tree as t

    names = sorted(client.get_children(t.JOB_STATES))
    stats = [client.exists_async(f"{t.JOB_STATES}/{s}") for s in names]
    counts = {}
    for name, result in zip(names, stats, strict=True):
        stat = result.get()
        counts[name] = stat.numChildren if stat else 0
    return counts


def _verify(store, batch, n: int, procs: Processes) -> None:
    jobs = store.batch_jobs(batch.bid)
    completed = len(jobs["batch-completed"])
    if completed == n:
        return
    failed = jobs["batch-failed"]
    emit(
        PART,
        event="failure",
        batch=batch.status,
        batch_message=batch.message,
        completed=completed,
        failed=len(failed),
        other={k: len(v) for k, v in jobs.items() if k not in ("batch-completed", "batch-failed")},
    )
    for jid in failed[:5]:
        job = store.get_job(jid)
        print(f"bench {PART}: {jid} failed after {job.last_successful_status}: {job.message}")
    procs.show_logs()
    raise SystemExit(f"bench {PART}: {completed} of {n} jobs completed (batch {batch.status})")


class Processes:
    """The queue's processes of one run, each with its log file; stopped by their own pids."""

    def __init__(self, log_dir: Path, env: dict[str, str]) -> None:
        self.log_dir = log_dir
        self.env = env
        self.procs: dict[str, subprocess.Popen] = {}
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, *argv: str) -> None:
        with open(self.log_dir / f"{name}.log", "wb") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "manage.py", *argv],
                cwd=REPO_ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C reaches the bench only; it stops these
            )

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items()}

    def dead(self) -> list[str]:
        return [
            f"{name} (exit {p.returncode})"
            for name, p in self.procs.items()
            if p.poll() is not None
        ]

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) each process has used so far."""
        used = {name: cpu_seconds(p.pid) for name, p in self.procs.items()}
        return {name: round(s, 2) for name, s in used.items() if s is not None}

    def stop_all(self) -> None:
        """SIGTERM to each, then SIGKILL to any still alive after ``STOP_GRACE`` seconds."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for name, p in self.procs.items():
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"bench {PART}: {name} ignored SIGTERM; killing it", file=sys.stderr)
                p.kill()
                p.wait()

    def show_logs(self, lines: int = 30) -> None:
        for name in self.procs:
            path = self.log_dir / f"{name}.log"
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                print(f"---- last lines of {name}.log ----", file=sys.stderr)
                print("\n".join(tail), file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process, from ``/proc/<pid>/stat`` (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _service_cpu() -> dict[str, float]:
    """CPU seconds of the throw-away ZooKeeper and Redis of ``with-test-services``, if known."""
    root = os.environ.get("MQ_TEST_TMP")
    if not root:
        return {}
    used = {}
    for name, pidfile in (("zookeeper", "zookeeper/zookeeper.pid"), ("redis", "redis/redis.pid")):
        try:
            seconds = cpu_seconds(int((Path(root) / pidfile).read_text().strip()))
        except (OSError, ValueError):
            continue
        if seconds is not None:
            used[name] = seconds
    return used


def _own_cpu() -> tuple[float, float]:
    """CPU seconds of this process (content server, poller) and of its waited-for children."""
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def read_zxid(hosts: str) -> int:
    """The last zxid of the first ZooKeeper in ``hosts`` (four-letter word ``srvr``)."""
    first = hosts.split(",")[0].split("/")[0]
    host, port = first.rsplit(":", 1) if ":" in first else (first, "2181")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"srvr")
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    match = re.search(rb"^Zxid: 0x([0-9a-fA-F]+)", data, re.MULTILINE)
    if not match:
        raise SystemExit(
            f"bench {PART}: ZooKeeper {first} answered srvr without a Zxid line "
            f"(is srvr in 4lw.commands.whitelist?): {data[:200]!r}"
        )
    return int(match.group(1), 16)
