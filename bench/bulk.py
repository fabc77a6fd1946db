"""Bulk admin actions at 100,000 jobs: the "all matching" confirmation page and the run.

One process, one ZooKeeper (``ZK_HOSTS``), one fresh chroot, a throw-away SQLite mirror:

1. Set-up (untimed): one batch of ``BENCH_BULK_N`` jobs (default 100,000) created and moved
   to Failed in pipelined rounds (``create_jobs``, ``move_jobs``); ``full_reconcile`` fills
   the mirror.
2. For a resume of every Failed job, then a hold of every Pending one (the jobs it resumed):
   the administrator's ``/actions/<action>/confirm?all=1&status=...`` page, ``BENCH_BULK_RUNS``
   times (default 20; median and p95 ms, target p95 < 2000 ms); the confirmation posted
   (``submit_ms``), queued as an ``mq-admin`` task; the task run in a process of its own
   (``bench.bulkworker``): its time and its peak RSS (``peak_rss_mb``); the mirror then
   counted (every job must show its new status).
3. With ``BENCH_BULK_BASELINE=1``, the raw kazoo ``multi`` baseline (``bench.zk.raw_moves_per_s``)
   over N nodes; ratio = resume jobs per second / baseline per second.

Code whose "all matching" page refuses more than ``selection.MAX_ITEMS`` jobs has that limit
raised above N here, so the same figures are measured on it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import (
    REPO_ROOT,
    emit,
    env_int,
    percentile,
    ran_in_own_process,
    summary,
    timer,
    zk_store,
)

PART = "bulk"
DEFAULT_N = 100_000
DEFAULT_RUNS = 20
TARGET_P95_MS = 2000.0
TARGET_RATIO = 0.5
ROUND = 500  # jobs per set-up round
SETUP_THREADS = 16
PAYLOAD = re.compile(r'name="payload" value="([^"]+)"')
CONFIGURATION = {
    "collection": "bench",
    "profile": "merritt_bench_content",
    "submitter": "bench/merritt-queue",
    "payload_url": "https://content.example.org/bench/object.zip",
    "payload_type": "container",
}
ACTIONS = [("job.resume", "Failed", "Pending"), ("job.hold", "Pending", "Held")]


def run(args) -> None:
    if ran_in_own_process(PART, "bench.bulk"):
        return
    n = env_int(PART, "BENCH_BULK_N", DEFAULT_N)
    store, cleanup = zk_store(PART)
    try:
        with tempfile.TemporaryDirectory(prefix="mq-bench-bulk-") as tmp:
            _bench(store, n, Path(tmp))
    finally:
        try:
            from merritt_queue.project import runtime

            runtime.close()
        finally:
            cleanup()


def _setup_django(tmp: Path, chroot: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "merritt_queue.project.settings"
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'bulk.sqlite3'}"
    os.environ["ZK_CHROOT"] = chroot
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("SECRET_KEY", "bench-only-" + "k" * 50)
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"
    os.environ["MQ_WORK_DIR"] = str(tmp / "work")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _create_failed(store, n: int) -> str:
    """``n`` Failed jobs of one batch, ``ROUND`` a round, ``SETUP_THREADS`` rounds at a time:
    ZooKeeper commits concurrent requests together, so the set-up waits on fewer syncs."""
    from merritt_queue.core.records import NewJob

    store.init()
    bid = store.new_batches.create_batch(
        {"batchID": f"bench-{uuid.uuid4().hex}", "collection": "bench"}
    ).id
    message = "bench: download failed: HTTP 404 Not Found"

    def one_round(size: int) -> None:
        jids = store.new_jobs.create_jobs(bid, [NewJob(CONFIGURATION)] * size)
        heads = store.jobs.job_heads(jids)
        moved = store.moves.move_jobs([(heads[j], "Failed", message, False) for j in jids])
        if bad := [m for m in moved if isinstance(m, Exception)]:
            raise SystemExit(f"bench {PART}: set-up failed: {bad[0]}")

    sizes = [min(ROUND, n - first) for first in range(0, n, ROUND)]
    with ThreadPoolExecutor(SETUP_THREADS) as pool:
        list(pool.map(one_round, sizes))
    return bid


def _confirm(client, url: str, runs: int, n: int) -> tuple[list[float], str]:
    times, body = [], ""
    for i in range(runs):
        start = time.perf_counter()
        response = client.get(url, secure=True)
        times.append((time.perf_counter() - start) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"bench {PART}: {url} answered {response.status_code}")
        if i == 0:
            body = response.content.decode()
            if f"<strong>{n}</strong>" not in body:
                emit(PART, event="warning", note=f"{url} does not show {n} items")
    return times, body


def _run_worker(pk: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "bench.bulkworker", str(pk)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"bench {PART}: the run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _action(client, name: str, before: str, after: str, n: int, runs: int, queued) -> dict:
    """One action over every ``before`` job: the page, the post, the run, the mirror."""
    from jobs.models import Job
    from steering.models import AdminAction

    url = f"/actions/{name}/confirm?all=1&status={before}"
    times, body = _confirm(client, url, runs, n)
    p95 = percentile(times, 95)
    emit(
        PART,
        event="confirm",
        action=name,
        median_ms=round(percentile(times, 50), 1),
        p95_ms=round(p95, 1),
        first_ms=round(times[0], 1),
        page_kb=len(body) // 1024,
    )
    found = PAYLOAD.search(body)
    if found is None:
        raise SystemExit(f"bench {PART}: {url} offers no confirmation")
    with timer() as post:
        response = client.post(
            url.replace("/confirm?all=1&status=" + before, "/execute"),
            {"payload": found.group(1), "reason": f"bench: {name}", "pace": "now"},
            secure=True,
        )
    if response.status_code != 302 or not queued:
        raise SystemExit(f"bench {PART}: the post answered {response.status_code}, queued nothing")
    pk = queued.pop()
    ran = _run_worker(pk)
    record = AdminAction.objects.get(pk=pk)
    if record.done != n:
        raise SystemExit(
            f"bench {PART}: {name} did {record.done} of {n} "
            f"(skipped {record.skipped}, failed {record.failed})"
        )
    mirrored = Job.objects.filter(status=after).count()
    emit(
        PART,
        event="run",
        action=name,
        seconds=round(ran["seconds"], 3),
        per_s=round(n / ran["seconds"], 1),
        peak_rss_mb=round(ran["peak_rss_mb"], 1),
        submit_ms=round(post.elapsed * 1000, 1),
        mirror_current=mirrored == n,
    )
    if mirrored != n:
        raise SystemExit(f"bench {PART}: the mirror shows {mirrored} of {n} jobs {after}")
    return {
        "p95": p95,
        "seconds": ran["seconds"],
        "rss": ran["peak_rss_mb"],
        "submit_ms": post.elapsed * 1000,
    }


def _bench(store, n: int, tmp: Path) -> None:
    hosts = os.environ["ZK_HOSTS"]
    chroot = store.client.chroot
    runs = env_int(PART, "BENCH_BULK_RUNS", DEFAULT_RUNS)
    emit(PART, event="config", n=n, runs=runs, zk_hosts=hosts, chroot=chroot)
    with timer() as setup:
        _create_failed(store, n)
    emit(PART, event="setup", jobs=n, seconds=round(setup.elapsed, 3))

    _setup_django(tmp, chroot)
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    from jobs.models import Job
    from mirror import facade as mirror
    from steering.actions import selection
    from steering.actions import views as action_views

    if hasattr(selection, "MAX_ITEMS"):
        selection.MAX_ITEMS = max(selection.MAX_ITEMS, n + 1)
    settings.MQ_BULK_INLINE_MAX = 0  # every action queued, then run by the worker process
    queued: list[int] = []
    action_views._queue = lambda record: queued.append(record.pk)
    with timer() as rec:
        drift = mirror.full_reconcile(store)
    emit(PART, event="reconcile", seconds=round(rec.elapsed, 3), jobs=drift.jobs)
    failed = Job.objects.filter(status="Failed").count()
    if failed != n:
        raise SystemExit(f"bench {PART}: the mirror holds {failed} Failed jobs, expected {n}")

    admin = User.objects.create_superuser("bench-admin", password="bench", email="")
    client = Client()
    client.force_login(admin)
    got = {name: _action(client, name, b, a, n, runs, queued) for name, b, a in ACTIONS}
    resume, hold = got["job.resume"], got["job.hold"]
    figures = {}
    if os.environ.get("BENCH_BULK_BASELINE") == "1":
        from bench.zk import raw_moves_per_s

        baseline = raw_moves_per_s(store.client, n)
        figures = {
            "baseline_per_s": round(baseline, 1),
            "ratio": round(n / resume["seconds"] / baseline, 3),
        }
    worst = max(resume["p95"], hold["p95"])
    emit(PART, under_target_p95=worst < TARGET_P95_MS)
    summary(
        PART,
        confirm_p95_ms=round(resume["p95"], 1),
        run_s=round(resume["seconds"], 1),
        peak_rss_mb=round(resume["rss"], 1),
        submit_ms=round(resume["submit_ms"], 1),
        hold_confirm_p95_ms=round(hold["p95"], 1),
        hold_run_s=round(hold["seconds"], 1),
        hold_peak_rss_mb=round(hold["rss"], 1),
        execute_per_s=round(n / resume["seconds"], 1),
        **figures,
        n=n,
    )


if __name__ == "__main__":
    from types import SimpleNamespace

    run(SimpleNamespace())
