"""What a depositor waits: one-file deposits through the API, idle and behind a big batch.

Set-up (untimed), under a fresh ``var/bench/tmp-latency-<uuid>`` removed at the end: the
queue's processes as ``make demo`` runs them (the web app under gunicorn as deployed, the
dispatcher, 2 workers on every queue, ``reconcile --watch``), a depositor with an API token,
Merritt's sample file ``4blocks.jpg`` and ``BENCH_LATENCY_BUSY`` (default 1000) random 4 KiB
files with their batch manifest, all served from 127.0.0.1.

Timed: ``BENCH_LATENCY_N`` (default 50) deposits of the sample file, one after the other
(``POST /api/v1/batches``, type ``file``, with its md5), each from the API's 201 until its job
is Completed and until its batch is Completed (the batch report written), read from ZooKeeper
every few milliseconds. First on the idle queue; then again while a big batch is being
worked (another one is submitted whenever the last is done): a deposit that ends after its
big batch finished is not counted as busy, and the run says how many were.

Where the time goes: each poll notes the first time it sees the batch and its job in each
state, so every deposit's wait splits into the steps between them (the dispatcher's wake-up
and the queue wait are in the time to the first state after Pending). After the batch's
report the status API is polled until it says Completed too: ``mirror_ms``, how much later
the web pages know.

Then (``bench/longdl.py``) every normal worker held inside a long, slow download, and
``BENCH_LATENCY_LONGDL_N`` (default 10) more deposits, each given
``BENCH_LATENCY_LONGDL_TIMEOUT`` (default 60) seconds; the first one past it ends the scenario
(a queue with no reserved worker waits for a download to end). The queue runs a reserved worker
beside the normal ones where the code has one (``reserved_queue_names``).
``BENCH_LATENCY_ONLY_LONGDL=1`` runs this scenario alone.

Summary: ``p50_ms`` and ``p95_ms`` (API 201 to job Completed, idle), ``busy_p50_ms`` and
``busy_p95_ms`` (the same behind the big batch), ``report_p50_ms`` and
``busy_report_p95_ms`` (to the batch report), ``n``; ``longdl_p50_ms`` and ``longdl_p95_ms``
(every normal worker in a long download; a deposit that timed out counts as the timeout, a
bound below its real wait), ``longdl_n`` and ``longdl_timed_out``. Targets: idle p50 <= 500 ms
and p95 <= 1,000 ms, busy p95 <= 5,000 ms, long-download p95 <= 2,000 ms.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
import time
import uuid
from collections import defaultdict
from pathlib import Path

import requests

from bench import longdl
from bench.common import (
    emit,
    env_int,
    manage,
    percentile,
    queue_processes,
    queue_run,
    submit_manifest,
    summary,
)
from harness import procs as harness_procs
from harness.services import free_port

PART = "latency"
DEFAULT_N = 50
DEFAULT_BUSY = 1000
FILE_SIZE = 4096
WORKERS = 2
SAMPLE = Path(__file__).resolve().parent.parent / "tests/fixtures/merritt-sample-files/4blocks.jpg"
POLL = 0.003
DEPOSIT_TIMEOUT = 120.0
BATCH_TIMEOUT = 15 * 60.0
TARGETS = {"p50_ms": 500, "p95_ms": 1000, "busy_p95_ms": 5000, "longdl_p95_ms": 2000}
DEFAULT_LONGDL_N = 10
DEFAULT_LONGDL_TIMEOUT = 60


class TimedOut(SystemExit):
    """A deposit not Completed within its time."""


DEPOSITOR_CODE = (
    "from django.contrib.auth import get_user_model\n"
    "from batches.models import ApiToken\n"
    "from door.rights import grant_depositor\n"
    "depositor = get_user_model().objects.create_user('latency')\n"
    "grant_depositor(depositor, ['bench'])\n"
    "print(ApiToken.issue(depositor, 'latency')[1])\n"
)


def run(args) -> None:
    n = env_int(PART, "BENCH_LATENCY_N", DEFAULT_N)
    busy_jobs = env_int(PART, "BENCH_LATENCY_BUSY", DEFAULT_BUSY)
    longdl_n = env_int(PART, "BENCH_LATENCY_LONGDL_N", DEFAULT_LONGDL_N)
    longdl_timeout = env_int(PART, "BENCH_LATENCY_LONGDL_TIMEOUT", DEFAULT_LONGDL_TIMEOUT)
    only_longdl = bool(env_int(PART, "BENCH_LATENCY_ONLY_LONGDL", 0))
    if only_longdl:
        n = busy_jobs = 0
    config = {"n": n, "busy_jobs": busy_jobs, "workers": WORKERS, "longdl_n": longdl_n}
    files = max(busy_jobs, 1)  # the set-up serves a manifest of at least one file
    with queue_run(PART, files, FILE_SIZE, **config, reserved=_reserved() is not None) as q:
        content = q.tmp / "content"
        shutil.copyfile(SAMPLE, content / SAMPLE.name)
        sample_url = q.manifest_url.rsplit("/", 1)[0] + "/" + SAMPLE.name
        md5 = hashlib.md5(SAMPLE.read_bytes(), usedforsecurity=False).hexdigest()
        token = manage(PART, q.env, "shell", "-c", DEPOSITOR_CODE).strip().splitlines()[-1]
        # Plain http on loopback, no proxy in front: the API must not redirect to https.
        q.env["SECURE_SSL_REDIRECT"] = "false"
        with queue_processes(PART, q) as (store, procs):
            web = _start(procs, q)
            deposit = _Depositor(store, web, token, sample_url, md5)
            idle = [deposit.one(f"idle-{i}") for i in range(n)]
            _report(PART, "idle", idle)
            busy: list[dict] = []
            big = None
            for i in range(n):
                # A big batch is being worked during every busy deposit: another one once
                # the last is done.
                if big is None or _final(store, big):
                    big = submit_manifest(PART, q.env, q.manifest_url)
                    emit(PART, event="busy_batch_submitted", bid=big, jobs=busy_jobs)
                    _wait_until_working(store, big)
                result = deposit.one(f"busy-{i}")
                result["busy"] = not _final(store, big)
                busy.append(result)
            busy_counted = [r for r in busy if r["busy"]]
            if len(busy_counted) < n:
                emit(PART, event="busy_batch_finished_meanwhile", counted=len(busy_counted), of=n)
            _report(PART, "busy", busy_counted)
            if big is not None:
                _wait_final(store, big)
            long_ms, timed_out = _long_downloads(q, store, deposit, longdl_n, longdl_timeout)
    figures = _figures(idle, busy_counted, n) if n else {}
    figures |= {
        "longdl_p50_ms": statistics.median(long_ms),
        "longdl_p95_ms": percentile(long_ms, 95),
        "longdl_n": len(long_ms),
        "longdl_timed_out": timed_out,
    }
    for name, target in TARGETS.items():
        if name in figures and not figures[name] <= target:
            emit(
                PART,
                event="above_target",
                figure=name,
                value=round(figures[name], 1),
                target=target,
            )
    summary(PART, **figures)


def _long_downloads(q, store, deposit, n: int, timeout: int) -> tuple[list[float], int]:
    """One-file deposits while every normal worker is inside a long download: each one's
    milliseconds to job Completed (the timeout for the one that timed out), and how many
    timed out."""
    slow = longdl.SlowServer(q.tmp / "slow", WORKERS)
    try:
        bid = longdl.hold_every_worker(PART, q.env, store, slow, WORKERS)
        results: list[float] = []
        for i in range(n):
            try:
                results.append(deposit.one(f"longdl-{i}", timeout=timeout)["job_ms"])
            except TimedOut as e:
                emit(PART, event="longdl_timed_out", deposit=i, seconds=timeout, why=str(e))
                return [*results, timeout * 1000.0], 1
            if not longdl.still_held(store, bid, WORKERS):
                raise SystemExit(f"bench {PART}: a long download ended during the scenario")
        return results, 0
    finally:
        slow.stop()


def _figures(idle: list[dict], busy_counted: list[dict], n: int) -> dict[str, float]:
    idle_ms = [r["job_ms"] for r in idle]
    busy_ms = [r["job_ms"] for r in busy_counted] or [float("nan")]
    return {
        "p50_ms": statistics.median(idle_ms),
        "p95_ms": percentile(idle_ms, 95),
        "busy_p50_ms": statistics.median(busy_ms),
        "busy_p95_ms": percentile(busy_ms, 95),
        "report_p50_ms": statistics.median(r["report_ms"] for r in idle),
        "busy_report_p95_ms": percentile([r["report_ms"] for r in busy_counted] or [0.0], 95),
        "n": n,
        "busy_n": len(busy_counted),
    }


def _reserved() -> list[str] | None:
    """The reserved worker's queues, where the code has reserved capacity."""
    try:
        from merritt_queue.core.queues import reserved_queue_names
    except ImportError:  # the code before the express lane: run side by side with it
        return None
    return reserved_queue_names()


def _start(procs, q) -> str:
    """The demo's processes, with the web app as deployed; the web app's address."""
    procs.dispatcher()
    for i in range(1, WORKERS + 1):
        procs.worker(f"worker{i}")
    reserved = _reserved()
    if reserved is not None:
        procs.worker("reserved1", *reserved)
    procs.start("reconciler", "manage.py", "reconcile", "--watch")
    port = free_port()
    procs.start(
        "web",
        "-m",
        "gunicorn",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "2",
        "merritt_queue.project.wsgi",
    )
    web = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    harness_procs.wait_for(
        "the queue's processes",
        lambda: "dispatching to" in procs.log("dispatcher") and _answers(f"{web}/healthz"),
        procs,
        timeout=120,
        all_alive=True,
    )
    emit(PART, event="started", seconds=round(time.perf_counter() - started, 3), pids=procs.pids())
    return web


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        return False


class _Depositor:
    """Deposits the sample file and times it; one HTTP session, as a depositor's client."""

    def __init__(self, store, web: str, token: str, url: str, md5: str) -> None:
        self.store, self.web, self.url, self.md5 = store, web, url, md5
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {token}"

    def one(self, label: str, timeout: float = DEPOSIT_TIMEOUT) -> dict:
        body = {
            "profile": "bench",
            "type": "file",
            "payload_url": self.url,
            "filename": SAMPLE.name,
            "digest_type": "md5",
            "digest_value": self.md5,
            "erc_what": f"latency {label}",
            "batchID": f"latency-{label}-{uuid.uuid4().hex[:8]}",
        }
        sent = time.perf_counter()
        response = self.http.post(f"{self.web}/api/v1/batches", json=body, timeout=30)
        if response.status_code != 201:
            raise SystemExit(
                f"bench {PART}: the API answered {response.status_code}: {response.text}"
            )
        start = time.perf_counter()
        bid = response.json()["batch_id"]
        seen = self._watch(bid, start, timeout)
        mirror_ms = self._mirror(bid, start)
        result = {
            "label": label,
            "api_ms": (start - sent) * 1000,
            "job_ms": seen["job:Completed"],
            "report_ms": seen["batch:Completed"],
            "mirror_ms": mirror_ms,
            "seen": seen,
        }
        emit(PART, event="deposit", **{k: _round(v) for k, v in result.items()})
        return result

    def _watch(self, bid: str, start: float, timeout: float) -> dict[str, float]:
        """Milliseconds after ``start`` at which the batch and its job were first seen in each
        state, until the batch is Completed."""
        from merritt_queue.core import tree

        client = self.store.client
        seen: dict[str, float] = {}
        jid = None
        while "batch:Completed" not in seen:
            now_ms = (time.perf_counter() - start) * 1000
            if now_ms > timeout * 1000:
                raise TimedOut(
                    f"bench {PART}: batch {bid} not Completed after {timeout:g} s: {seen}"
                )
            status = _status(client, tree.batch_node(bid, "status"))
            seen.setdefault(f"batch:{status}", now_ms)
            if status == "Failed":
                raise SystemExit(f"bench {PART}: batch {bid} failed")
            if jid is None and status != "Pending":
                jobs = [j for group in self.store.batches.batch_jobs(bid).values() for j in group]
                jid = jobs[0] if jobs else None
            if jid is not None:
                job_status = _status(client, tree.job_node(jid, "status"))
                seen.setdefault(f"job:{job_status}", now_ms)
                if job_status == "Failed":
                    raise SystemExit(f"bench {PART}: job {jid} failed")
            time.sleep(POLL)
        seen.setdefault("job:Completed", seen["batch:Completed"])
        return seen

    def _mirror(self, bid: str, start: float) -> float:
        """Milliseconds after ``start`` until the status API (the mirror) says Completed."""
        deadline = time.perf_counter() + DEPOSIT_TIMEOUT
        while time.perf_counter() < deadline:
            answer = self.http.get(f"{self.web}/api/v1/batches/{bid}", timeout=30)
            if answer.status_code == 200 and answer.json().get("status") == "Completed":
                return (time.perf_counter() - start) * 1000
            time.sleep(0.01)
        raise SystemExit(f"bench {PART}: the status API never said batch {bid} Completed")


def _status(client, path: str) -> str:
    data, _ = client.get(path)
    return json.loads(data)["status"]


def _final(store, bid: str) -> bool:
    return store.batches.get_batch(bid).status in ("Completed", "Failed")


def _wait_until_working(store, bid: str) -> None:
    deadline = time.perf_counter() + BATCH_TIMEOUT
    while time.perf_counter() < deadline:
        if store.batches.get_batch(bid).status != "Pending":
            jobs = store.batches.batch_jobs(bid)
            if sum(len(v) for v in jobs.values()):
                return
        time.sleep(0.05)
    raise SystemExit(f"bench {PART}: the big batch {bid} never started")


def _wait_final(store, bid: str) -> None:
    deadline = time.perf_counter() + BATCH_TIMEOUT
    while not _final(store, bid):
        if time.perf_counter() > deadline:
            raise SystemExit(
                f"bench {PART}: the big batch {bid} is not final after {BATCH_TIMEOUT:g} s"
            )
        time.sleep(0.5)


def _report(part: str, kind: str, results: list[dict]) -> None:
    """Where the time went: the median of each stretch between states first seen."""
    if not results:
        return
    stretches: dict[str, list[float]] = defaultdict(list)
    for r in results:
        order = sorted(r["seen"].items(), key=lambda kv: kv[1])
        previous, at = "api:201", 0.0
        for name, ms in order:
            stretches[f"{previous} -> {name}"].append(ms - at)
            previous, at = name, ms
        stretches["mirror after report"].append(r["mirror_ms"] - r["report_ms"])
        stretches["api request"].append(r["api_ms"])
    emit(
        part,
        event=f"where_{kind}",
        n=len(results),
        median_ms={k: round(statistics.median(v), 1) for k, v in stretches.items()},
        seen_in={k: len(v) for k, v in stretches.items()},
    )


def _round(value):
    return round(value, 1) if isinstance(value, float) else value
