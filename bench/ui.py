"""UI benchmark: server time and SQL queries of the web pages over a mirror of 100,000 jobs.

1. Fill a throw-away SQLite mirror (``DATABASE_URL`` set before ``django.setup()``,
   then ``migrate``) with jobs in batches of uneven size, a realistic spread of
   statuses, collections and error messages, and every job's JobEvents.
2. With Django's test ``Client`` (logged in), request each page ``RUNS`` times;
   report the median and p95 server time and the SQL queries of one request.
   The first request runs with an empty cache and is reported apart (``first_ms``):
   two dashboard aggregates are cached for a few seconds (see dashboard/queries.py).
3. Do it at 1,000 and at 100,000 jobs: the query count of a page must not change.

Pages whose URL does not resolve yet are reported as missing, not measured.
Environment: ``MQ_BENCH_UI_JOBS`` (default 100000), ``MQ_BENCH_UI_RUNS`` (default 50).
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from datetime import UTC, timedelta
from pathlib import Path
from urllib.parse import urlencode

from bench.common import emit, env_int, percentile, ran_in_own_process, summary

PART = "ui"
SMALL = 1_000
JOBS_PER_BATCH = 100
TARGET_P95_MS = 150.0
SEED = 20261121

# Share of jobs per status: most are done, a tail is in flight, failed or held.
JOB_WEIGHTS = {
    "Completed": 74,
    "Failed": 7,
    "Pending": 5,
    "Held": 2,
    "Deleted": 2,
    "Estimating": 1,
    "Provisioning": 1,
    "Downloading": 2,
    "Processing": 2,
    "Storing": 2,
    "Recording": 1,
    "Notify": 1,
}
BATCH_WEIGHTS = {
    "Completed": 80,
    "Processing": 8,
    "Failed": 5,
    "Pending": 2,
    "Held": 1,
    "Reporting": 1,
    "UpdateReporting": 1,
    "Deleted": 2,
}
# Messages of failed jobs: a few common ones, and some that name the job's own file.
MESSAGES = [
    "download failed: HTTP 404 Not Found",
    "download failed: connection timed out after 30 s",
    "digest mismatch: md5 expected {h} got {g}",
    "storage node 9501 refused the object: 503 Service Unavailable",
    "manifest line 3: 5 fields, expected 12",
    "minter: EZID answered 500 Internal Server Error",
    "inventory: object ark:/13030/m5{n} is locked by another job",
    "container is not a zip, tar or gzip file",
    "not enough disk space: 12 GB needed, 3 GB free",
    "callback https://example.org/hook failed: 502 Bad Gateway",
]
# The dashboard's cause of the digest message above (ui.signatures).
DIGEST_CAUSE = "digest mismatch: md5 expected <hex> got <hex>"


def _pick(rng: random.Random, weights: dict[str, int]) -> str:
    return rng.choices(list(weights), list(weights.values()))[0]


def fill(n_jobs: int) -> dict:
    """Fill the mirror with ``n_jobs`` jobs; returns ids the pages are measured with."""
    from django.contrib.auth.models import Group, User
    from django.db import connection, transaction
    from django.utils import timezone

    from batches.models import Batch, Collection
    from jobs.models import Job, JobEvent, MirrorState
    from merritt_queue.core.states import JOB_STEPS

    rng = random.Random(SEED)
    now = timezone.now()
    names = [f"coll-{i:02d}" for i in range(40)]
    coll_weights = [1 / (i + 1) for i in range(40)]
    steps = ["Pending", *JOB_STEPS, "Completed"]

    with transaction.atomic():
        for model in (JobEvent, Job, Batch, Collection, MirrorState):
            model.objects.all().delete()
        batches, jobs, events = [], [], []
        jid = 0
        n_batches = max(1, n_jobs // JOBS_PER_BATCH)
        sizes = [rng.randint(1, 2 * JOBS_PER_BATCH - 1) for _ in range(n_batches)]
        sizes[-1] += n_jobs - sum(sizes)  # exactly n_jobs in all
        while sizes[-1] < 1:
            sizes.pop()
            sizes[-1] += n_jobs - sum(sizes)
        for b, size in enumerate(sizes, start=1):
            bid = f"bid{b:010d}"
            coll = rng.choices(names, coll_weights)[0]
            submitted = now - timedelta(minutes=rng.randint(0, 7 * 24 * 60))
            counts: dict[str, int] = {}
            for _ in range(size):
                jid += 1
                status = _pick(rng, JOB_WEIGHTS)
                counts[status] = counts.get(status, 0) + 1
                job, job_events = _job(rng, jid, bid, coll, status, now, steps)
                jobs.append(job)
                events += job_events
            batches.append(
                Batch(
                    bid=bid,
                    uuid=f"uuid-{b}",
                    collection=coll,
                    profile=f"{coll}_content",
                    submitter="bench/ann",
                    type="manifest",
                    title=f"Bench batch {b}",
                    submitted=submitted,
                    status=_pick(rng, BATCH_WEIGHTS),
                    last_modified=submitted + timedelta(minutes=5),
                    submission={"profile": f"{coll}_content", "submitter": "bench/ann"},
                    acquired=True,
                    locked=rng.random() < 0.02,
                    job_counts=counts,
                    job_total=size,
                    read_at=now,
                )
            )
        Batch.objects.bulk_create(batches, batch_size=1000)
        Job.objects.bulk_create(jobs, batch_size=2000)
        _insert_events(connection, JobEvent._meta.db_table, events)
        Collection.objects.bulk_create(
            Collection(
                mnemonic=name,
                held=i % 13 == 5,
                held_by="admin:ann" if i % 13 == 5 else "",
                held_reason="storage migration" if i % 13 == 5 else "",
                held_at=now - timedelta(hours=i) if i % 13 == 5 else None,
                read_at=now,
            )
            for i, name in enumerate(names)
        )
        running = [j.jid for j in jobs if j.locked]
        MirrorState.objects.create(name="locks", at=now, detail=_locks(rng, now, running))
        MirrorState.objects.create(name="consistency", at=now, detail=_findings())
        User.objects.filter(username="bench").delete()
        bench = User.objects.create_user("bench", password="bench", is_staff=True)
        bench.groups.add(Group.objects.get_or_create(name="viewer")[0])  # a role: reads all
    middle = Job.objects.filter(status="Completed").order_by("jid")[n_jobs // 3]
    # The Pending job the dispatcher would take last: its place counts every job ahead.
    last = Job.objects.filter(status="Pending").order_by("-priority", "-jid").first()
    return {
        "jid": middle.jid,
        "bid": middle.batch_id,
        "collection": names[0],
        "pending": last.jid if last else middle.jid,
    }


def _job(rng, jid, bid, coll, status, now, steps):
    from jobs.models import Job
    from ui.signatures import cause_of

    jid_s = f"jid{jid:010d}"
    # The statuses this job went through, in order, ending with its current one.
    if status in steps:
        path = steps[: steps.index(status) + 1]
        last_ok = path[-2] if len(path) > 1 else ""
    elif status == "Failed":
        failed_in = rng.choice(steps[:-1])
        path = [*steps[: steps.index(failed_in) + 1], "Failed"]
        last_ok = path[-3] if len(path) > 2 else ""
    elif status == "Held":
        path, last_ok = ["Pending", "Held"], "Pending"
    else:  # Deleted: held, then deleted
        path, last_ok = ["Pending", "Held", "Deleted"], "Pending"
    # Its last move: completions spread over the last week, most recent densest.
    minutes = int(rng.expovariate(1 / (36 * 60))) % (7 * 24 * 60)
    at = now - timedelta(minutes=minutes if status == "Completed" else rng.randint(0, 600))
    times = []
    for _ in path:
        times.append(at)
        at -= timedelta(seconds=rng.randint(5, 600))
    events = [
        [jid_s, bid, old, new, when, "", 0, "worker", version, True]
        for version, (old, new, when) in enumerate(
            zip(["", *path], path, reversed(times), strict=False)
        )
    ]
    message = ""
    if status == "Failed":
        message = rng.choice(MESSAGES).format(
            h=f"{rng.getrandbits(64):016x}", g=f"{rng.getrandbits(64):016x}", n=jid
        )
        events[-1][5] = message
    job = Job(
        jid=jid_s,
        batch_id=bid,
        collection=coll,
        profile=f"{coll}_content",
        submitter="bench/ann",
        status=status,
        last_successful_status=last_ok,
        retry_count=0,
        priority=rng.choice((5, 5, 5, 1, 9)),
        space_needed=rng.randint(0, 10**9),
        local_id=f"local-{jid}",
        ark=f"ark:/13030/m5{jid:07d}" if len(path) > 5 else "",
        title=f"Bench object {jid}",
        message=message,
        signature=cause_of(message),
        last_modified=events[-1][4],
        configuration={
            "profile": f"{coll}_content",
            "submitter": "bench/ann",
            "payload_url": f"https://content.example.org/{coll}/{jid}.zip",
            "payload_type": "container",
            "local_id": f"local-{jid}",
        },
        # A few workers hold a job each; the rest of the in-flight jobs wait their turn.
        locked=status in steps[1:-1] and rng.random() < 0.002,
        status_version=len(path) - 1,
        read_at=now,
    )
    return job, events


def _insert_events(connection, table: str, rows: list[tuple]) -> None:
    """JobEvents by executemany: 10x faster than bulk_create for ~800,000 rows."""
    if connection.vendor == "sqlite":  # Django stores datetimes in SQLite as naive UTC text
        rows = [(*r[:4], r[4].astimezone(UTC).replace(tzinfo=None), *r[5:]) for r in rows]
    sql = (
        f"INSERT INTO {table} (jid, bid, from_status, to_status, at, message, retry_count, "
        "actor, status_version, exact) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 50_000):
            cursor.executemany(sql, rows[start : start + 50_000])


def _locks(rng: random.Random, now, running: list[str]) -> dict:
    """MirrorState("locks").detail as mirror.locks_detail writes it."""

    def entry(path: str, kind: str, name: str, seconds: int, owner: str = "", data: str = ""):
        at = (now - timedelta(seconds=seconds)).isoformat()
        return {"path": path, "kind": kind, "name": name, "ctime": at, "owner": owner, "data": data}

    def session() -> str:
        return f"{rng.getrandbits(48):#x}"

    locks = [entry("/locks/queue/ingest", "queue", "ingest", 60)]
    for i in range(60):
        name = f"ark_13030_m5{i:07d}"
        locks.append(
            entry(
                f"/locks/storage/{name}", "storage", name, rng.randint(1, 7200), "", f"jid{i:010d}"
            )
        )
    for kind in ("inventory", "localid"):
        for i in range(20):
            name = f"item_{i}"
            locks.append(entry(f"/locks/{kind}/{name}", kind, name, rng.randint(1, 600), session()))
    for jid in running:
        locks.append(entry(f"/jobs/{jid}/lock", "job", jid, rng.randint(1, 300), session()))
    paused_at = (now - timedelta(seconds=60)).isoformat()
    return {"paused": True, "paused_at": paused_at, "locks": locks, "read_at": now.isoformat()}


def _findings() -> dict:
    findings: list[dict] = [
        {
            "kind": "missing-index" if i % 3 else "stale-lock",
            "path": f"/jobs/states/pending/05-jid{i:010d}",
            "reason": f"Job jid{i:010d} is Pending but has no index entry",
            "repair": f"create /jobs/states/pending/05-jid{i:010d}",
            "repaired": i % 2 == 0,
        }
        for i in range(200)
    ]
    repaired = sum(f["repaired"] for f in findings)
    return {
        "repair": False,
        "total": len(findings),
        "repaired": repaired,
        "unrepaired": len(findings) - repaired,
        "findings": findings,
    }


def pages(ids: dict) -> list[tuple[str, str]]:
    return [
        ("dashboard", "/"),
        ("collections", "/collections/"),
        ("locks", "/locks/"),
        ("consistency", "/consistency/"),
        ("jobs", "/jobs/"),
        ("jobs-page-500", "/jobs/?page=500"),
        ("jobs-filtered", f"/jobs/?status=Failed&collection={ids['collection']}"),
        # A text search reads the text index (mirror.textindex), a cause its indexed column.
        ("jobs-search", "/jobs/?q=md5"),
        ("jobs-search-rare", "/jobs/?q=nothing-like-this"),
        # A resolver's link to a job's ARK, and a part from the middle of one (the text index).
        ("jobs-search-link", f"/jobs/?q=https://n2t.net/ark:/13030/m5{ids['jid'][-7:]}"),
        ("jobs-search-ark-part", f"/jobs/?q=13030/m5{ids['jid'][-7:-1]}"),
        ("jobs-cause", "/jobs/?" + urlencode({"status": "Failed", "signature": DIGEST_CAUSE})),
        # Stalled jobs: the jobs in a step judged by the step times learned (jobs.stalls).
        ("jobs-stalled", "/jobs/?stalled=1"),
        # Quarantined jobs (ui.quarantine): counted from the timeline's Failed rows.
        ("jobs-quarantined", "/jobs/?quarantined=1"),
        ("job-detail", f"/jobs/{ids['jid']}/"),
        # Why it waits, its place and its estimate (jobs.waitorder); the lists by reason.
        ("job-detail-waiting", f"/jobs/{ids['pending']}/"),
        ("jobs-waiting", "/jobs/?waiting=worker"),
        ("batches-waiting", "/batches/?waiting=worker"),
        ("batches", "/batches/"),
        ("batches-search", "/batches/?q=manifest"),
        ("batch-detail", f"/batches/{ids['bid']}/"),
    ]


def _exists(url: str) -> bool:
    from django.urls import Resolver404, resolve

    try:
        resolve(url.split("?", 1)[0])
    except Resolver404:
        return False
    return True


def measure(n_jobs: int, runs: int) -> list[dict]:
    """Fill the mirror with ``n_jobs`` jobs and time every page; one result per page."""
    from django.core.cache import cache
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from jobs.models import JobEvent

    t0 = time.perf_counter()
    ids = fill(n_jobs)
    emit(
        PART,
        jobs=n_jobs,
        fill_s=round(time.perf_counter() - t0, 1),
        events=JobEvent.objects.count(),
    )
    client = Client()
    client.login(username="bench", password="bench")
    results = []
    for name, url in pages(ids):
        if not _exists(url):
            results.append({"jobs": n_jobs, "page": name, "url": url, "measured": False})
            emit(PART, **results[-1], note="no such page yet")
            continue
        cache.clear()  # the first request computes what a page caches: report it apart
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            status = client.get(url).status_code
            first_ms = (time.perf_counter() - start) * 1000
        queries = len(ctx.captured_queries)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            client.get(url)
            times.append((time.perf_counter() - start) * 1000)
            reset_queries()
        result = {
            "jobs": n_jobs,
            "page": name,
            "url": url,
            "measured": True,
            "status": status,
            "median_ms": round(percentile(times, 50), 1),
            "p95_ms": round(percentile(times, 95), 1),
            "first_ms": round(first_ms, 1),
            "queries": queries,
        }
        results.append(result)
        emit(PART, **result)
    return results


def _setup(tmp: Path) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "merritt_queue.project.settings"
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/ui.sqlite3"
    # Production-like: no query log kept per request, and the test client's host allowed.
    os.environ["DEBUG"] = "false"
    # Over plain HTTP as the test client asks: else every page answers its redirect to https.
    os.environ["SECURE_SSL_REDIRECT"] = "false"
    os.environ.setdefault("SECRET_KEY", "bench-only-" + "k" * 50)
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"
    # The test client speaks plain http: with DEBUG off every page would redirect to https.
    os.environ["SECURE_SSL_REDIRECT"] = "false"
    os.environ["SESSION_COOKIE_SECURE"] = "false"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def run(args) -> None:
    if ran_in_own_process(PART, "bench.ui"):
        return
    big = env_int(PART, "MQ_BENCH_UI_JOBS", 100_000)
    runs = env_int(PART, "MQ_BENCH_UI_RUNS", 50)
    with tempfile.TemporaryDirectory(prefix="mq-bench-ui-") as tmp:
        _setup(Path(tmp))
        small = {r["page"]: r for r in measure(min(SMALL, big), runs)}
        large = measure(big, runs)
    measured = [r for r in large if r["measured"]]
    for r in measured:
        emit(
            PART,
            page=r["page"],
            queries_small=small[r["page"]]["queries"],
            queries_large=r["queries"],
            constant=small[r["page"]]["queries"] == r["queries"],
            under_target=r["p95_ms"] < TARGET_P95_MS,
        )
    emit(
        PART,
        measured=[r["page"] for r in measured],
        missing=[r["page"] for r in large if not r["measured"]],
    )
    summary(
        PART,
        p95_ms_max=max(r["p95_ms"] for r in measured),
        queries_max=max(r["queries"] for r in [*measured, *small.values()] if r["measured"]),
        jobs=big,
    )


if __name__ == "__main__":
    from types import SimpleNamespace

    run(SimpleNamespace())
