"""Bulk admin actions: the "all matching" confirmation page and a resume of N failed jobs.

One process, one ZooKeeper (``ZK_HOSTS``), one fresh chroot, a throw-away SQLite mirror:

1. Set-up (untimed): one batch and ``BENCH_BULK_N`` jobs (default 10000), each created
   and moved to Failed through the store; ``full_reconcile`` fills the mirror.
2. With a logged-in administrator (Django's test ``Client``), request
   ``/actions/job.resume/confirm?all=1&status=Failed`` ``RUNS`` times: median and p95 ms
   (target p95 < 2000 ms).
3. Resume all N through ``steering.actions.execution.execute`` (ids and versions from the mirror),
   timed; ZooKeeper writes per job from the zxid delta (``srvr``). If the settings have
   ``MQ_BULK_INLINE_MAX``, it is raised above N so the execution runs inline.
4. The raw kazoo ``multi`` baseline (``bench.zk.raw_moves_per_s``) over N nodes, in the
   same run; ratio = execute_per_s / baseline_per_s (target >= 0.5).
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import (
    emit,
    env_int,
    percentile,
    ran_in_own_process,
    summary,
    timer,
    zk_store,
)
from bench.zkwords import read_zxid

PART = "bulk"
DEFAULT_N = 10_000
RUNS = 20
TARGET_P95_MS = 2000.0
TARGET_RATIO = 0.5
URL = "/actions/job.resume/confirm?all=1&status=Failed"
CONFIGURATION = {
    "collection": "bench",
    "profile": "merritt_bench_content",
    "submitter": "bench/merritt-queue",
    "payload_url": "https://content.example.org/bench/object.zip",
    "payload_type": "container",
}


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
    store.init()
    bid = store.new_batches.create_batch(
        {"batchID": f"bench-{uuid.uuid4().hex}", "collection": "bench"}
    ).id
    for _ in range(n):
        jid = store.new_jobs.create_job(bid, CONFIGURATION)
        store.moves.transition_job(jid, "Failed", "bench: download failed: HTTP 404 Not Found")
    return bid


def _bench(store, n: int, tmp: Path) -> None:
    hosts = os.environ["ZK_HOSTS"]
    chroot = store.client.chroot
    emit(PART, event="config", n=n, runs=RUNS, zk_hosts=hosts, chroot=chroot)
    with timer() as setup:
        _create_failed(store, n)
    emit(PART, event="setup", jobs=n, seconds=round(setup.elapsed, 3))

    _setup_django(tmp, chroot)
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    from jobs.models import Job
    from mirror import facade as mirror
    from steering.actions.catalog import ACTIONS
    from steering.actions.execution import execute

    if hasattr(settings, "MQ_BULK_INLINE_MAX"):
        settings.MQ_BULK_INLINE_MAX = n + 1
    with timer() as rec:
        drift = mirror.full_reconcile(store)
    emit(PART, event="reconcile", seconds=round(rec.elapsed, 3), jobs=drift.jobs)
    failed = Job.objects.filter(status="Failed").count()
    if failed != n:
        raise SystemExit(f"bench {PART}: the mirror holds {failed} Failed jobs, expected {n}")

    admin = User.objects.create_superuser("bench-admin", password="bench", email="")
    client = Client()
    client.force_login(admin)
    times = []
    for i in range(RUNS):
        start = time.perf_counter()
        response = client.get(URL)
        times.append((time.perf_counter() - start) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"bench {PART}: {URL} answered {response.status_code}")
        if i == 0 and f"<strong>{n}</strong>" not in response.content.decode():
            emit(PART, event="warning", note=f"confirmation page does not show {n} items")
    p95 = percentile(times, 95)
    emit(
        PART,
        event="confirm",
        median_ms=round(percentile(times, 50), 1),
        p95_ms=round(p95, 1),
        first_ms=round(times[0], 1),
        under_target=p95 < TARGET_P95_MS,
    )

    items: list[tuple[str, int | None]] = list(
        Job.objects.filter(status="Failed").order_by("jid").values_list("jid", "status_version")
    )
    gc.collect()
    zxid_before = read_zxid(hosts)
    with timer() as ex:
        record = execute(
            admin,
            ACTIONS["job.resume"],
            items,
            "bench: storage back",
            token=f"bench-{uuid.uuid4().hex}",
            selection="status=Failed",
        )
    zxid_after = read_zxid(hosts)
    record.refresh_from_db()
    if record.done != n:
        raise SystemExit(
            f"bench {PART}: resume did {record.done} of {n} "
            f"(skipped {record.skipped}, failed {record.failed})"
        )
    execute_per_s = n / ex.elapsed
    writes_per_job = (zxid_after - zxid_before) / n
    emit(
        PART,
        event="execute",
        seconds=round(ex.elapsed, 3),
        per_s=round(execute_per_s, 1),
        zk_writes=zxid_after - zxid_before,
        pending_in_mirror=Job.objects.filter(status="Pending").count(),
    )

    from bench.zk import raw_moves_per_s

    baseline = raw_moves_per_s(store.client, n)
    ratio = execute_per_s / baseline
    emit(PART, event="baseline", per_s=round(baseline, 1), ratio=round(ratio, 3))
    emit(PART, under_target_p95=p95 < TARGET_P95_MS, ratio_ok=ratio >= TARGET_RATIO)
    summary(
        PART,
        confirm_p95_ms=round(p95, 1),
        execute_per_s=round(execute_per_s, 1),
        baseline_per_s=round(baseline, 1),
        ratio=round(ratio, 3),
        zk_writes_per_job=round(writes_per_job, 3),
        n=n,
    )


if __name__ == "__main__":
    from types import SimpleNamespace

    run(SimpleNamespace())
