"""UI benchmark: server time and SQL queries of the web pages over mirrors of up to 1,000,000 jobs.

1. Fill a throw-away mirror (bench.uifill: jobs in batches of uneven size, a realistic
   spread of statuses, collections and error messages, every job's JobEvents, written in
   chunks; then ANALYZE) on each backend: SQLite, and PostgreSQL (a throw-away cluster from
   ``scripts/services.sh pg-start``, or a fresh database on the server
   ``MQ_BENCH_UI_PG_URL`` names, dropped afterwards).
2. With Django's test ``Client`` (logged in), request each page ``RUNS`` times;
   report the median and p95 server time and the SQL queries of one request.
   The first request runs with an empty cache and is reported apart (``first_ms``):
   some dashboard aggregates are cached for a few seconds (see dashboard/queries.py).
3. Do it at every size (default 1,000, 100,000 and 1,000,000 jobs): the query count of a
   page must not change with the size.

Each backend runs in its own process (Django is set up once per process, on one database).
Pages whose URL does not resolve yet are reported as missing, not measured.
Environment: ``MQ_BENCH_UI_SIZES`` (comma list, default ``1000,100000,1000000``),
``MQ_BENCH_UI_BACKENDS`` (default ``sqlite,postgresql``), ``MQ_BENCH_UI_RUNS`` (default 30),
``MQ_BENCH_UI_PG_URL`` (a PostgreSQL server to use instead of a throw-away cluster).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

from bench.common import REPO_ROOT, emit, env_int, percentile, summary
from bench.uifill import DIGEST_CAUSE, fill

PART = "ui"
TARGET_P95_MS = 150.0
BACKENDS = ("sqlite", "postgresql")
DEFAULT_SIZES = "1000,100000,1000000"
SERVICES = REPO_ROOT / "scripts" / "services.sh"


def pages(ids: dict) -> list[tuple[str, str]]:
    return [
        ("dashboard", "/"),
        ("collections", "/collections/"),
        ("locks", "/locks/"),
        ("consistency", "/consistency/"),
        ("jobs", "/jobs/"),
        # Deep in the list: page 500, or halfway down a smaller mirror's (it has no page 500).
        ("jobs-page-deep", f"/jobs/?page={ids['deep_page']}"),
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
        # The queue an hour and two hours ago (mirror.moment): it costs what was written since.
        ("moment", "/moment/?" + urlencode({"at": _ago(hours=1)})),
        ("moment-diff", "/moment/?" + urlencode({"at": _ago(hours=2), "diff": _ago(hours=1)})),
        # Merritt's access queue (accessui): the list of both queues, filtered and searched.
        ("access", "/access/"),
        ("access-failed", "/access/?status=Failed&queue=small"),
        ("access-search", "/access/?q=qid42"),
    ]


def _ago(**delta: float) -> str:
    """A moment before the measurement, as the page's picker sends it (the site's zone)."""
    from datetime import timedelta

    from django.utils import timezone

    return timezone.localtime(timezone.now() - timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%S")


def _exists(url: str) -> bool:
    from django.urls import Resolver404, resolve

    try:
        resolve(url.split("?", 1)[0])
    except Resolver404:
        return False
    return True


def measure(n_jobs: int, runs: int, backend: str) -> list[dict]:
    """Fill the mirror with ``n_jobs`` jobs and time every page; one result per page, and
    one for the fill."""
    from django.core.cache import cache
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from jobs.models import JobEvent

    t0 = time.perf_counter()
    ids = fill(n_jobs)
    filled = {
        "backend": backend,
        "jobs": n_jobs,
        "fill": True,
        "measured": False,
        "fill_s": round(time.perf_counter() - t0, 1),
        "events": JobEvent.objects.count(),
    }
    emit(PART, **filled)
    client = Client()
    client.login(username="bench", password="bench")
    results = [filled]
    for name, url in pages(ids):
        if not _exists(url):
            results.append(
                {"backend": backend, "jobs": n_jobs, "page": name, "url": url, "measured": False}
            )
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
            "backend": backend,
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


def _setup(url: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "merritt_queue.project.settings"
    os.environ["DATABASE_URL"] = url
    # Production-like: no query log kept per request, and the test client's host allowed.
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("SECRET_KEY", "bench-only-" + "k" * 50)
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"
    # The test client speaks plain http: with DEBUG off every page would redirect to https.
    os.environ["SECURE_SSL_REDIRECT"] = "false"
    os.environ["SESSION_COOKIE_SECURE"] = "false"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _sizes() -> list[int]:
    text = os.environ.get("MQ_BENCH_UI_SIZES", "") or DEFAULT_SIZES
    try:
        sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise SystemExit(
            f"bench {PART}: MQ_BENCH_UI_SIZES={text!r} is not a list of numbers"
        ) from None
    if not sizes or sizes[0] < 1:
        raise SystemExit(f"bench {PART}: MQ_BENCH_UI_SIZES={text!r}: sizes are at least 1")
    return sizes


def _backends() -> list[str]:
    text = os.environ.get("MQ_BENCH_UI_BACKENDS", "") or ",".join(BACKENDS)
    chosen = [b.strip() for b in text.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown or not chosen:
        raise SystemExit(f"bench {PART}: MQ_BENCH_UI_BACKENDS={text!r}; known: {BACKENDS}")
    return chosen


def _child(backend: str, url: str, out: Path) -> None:
    """In its own process: every size on one backend; the results to ``out`` as JSON."""
    _setup(url)
    runs = env_int(PART, "MQ_BENCH_UI_RUNS", 30)
    results = []
    for size in _sizes():
        results += measure(size, runs, backend)
    out.write_text(json.dumps(results))


def _services(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SERVICES), *args], capture_output=True, text=True, timeout=180
    )


class _Postgres:
    """A fresh database: on ``MQ_BENCH_UI_PG_URL``'s server, else on a throw-away cluster."""

    def __init__(self, tmp: Path) -> None:
        from harness.services import free_port

        self.cluster: Path | None = None
        server = os.environ.get("MQ_BENCH_UI_PG_URL", "")
        if not server:
            self.cluster = tmp / "postgres"
            for _ in range(3):  # another program may take the free port first
                port = free_port()
                done = _services("pg-start", str(self.cluster), str(port))
                if done.returncode == 0:
                    break
            else:
                raise SystemExit(f"bench {PART}: pg-start failed: {done.stdout}{done.stderr}")
            server = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self.server = server
        self.name = f"mq_bench_ui_{uuid.uuid4().hex[:12]}"
        self._sql(f'CREATE DATABASE "{self.name}"')
        self.url = urlunsplit(urlsplit(server)._replace(path=f"/{self.name}"))

    def _sql(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(statement)

    def close(self) -> None:
        try:
            self._sql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            if self.cluster is not None:
                _services("pg-stop", str(self.cluster))


def _run_backend(backend: str, tmp: Path) -> list[dict]:
    pg = _Postgres(tmp) if backend == "postgresql" else None
    url = pg.url if pg else f"sqlite:///{tmp}/ui.sqlite3"
    out = tmp / f"{backend}.json"
    env = {**os.environ, "MQ_BENCH_UI_CHILD": f"{backend} {url} {out}"}
    try:
        done = subprocess.run([sys.executable, "-m", "bench.ui"], cwd=REPO_ROOT, env=env)
    finally:
        if pg:
            pg.close()
    if done.returncode:
        raise SystemExit(f"bench {PART}: {backend} failed (exit {done.returncode})")
    return json.loads(out.read_text())


def run(args) -> None:
    sizes = _sizes()
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mq-bench-ui-") as name:
        tmp = Path(name)
        tmp.chmod(0o755)  # pg-start as root runs PostgreSQL as postgres, who must reach it
        for backend in _backends():
            results += _run_backend(backend, tmp)
    largest = sizes[-1]
    measured = [r for r in results if r["measured"]]
    by_page: dict[tuple[str, str], dict[int, int]] = {}
    for r in measured:
        by_page.setdefault((r["backend"], r["page"]), {})[r["jobs"]] = r["queries"]
    constant = True
    # A page may make fewer queries on a larger mirror by design (a text most jobs hold is
    # listed uncounted: mirror.textindex.plenty); none may make more.
    grow = []
    for (backend, page), counts in sorted(by_page.items()):
        same = len(set(counts.values())) == 1
        constant = constant and same
        if max(counts.values()) > counts[min(counts)]:
            grow.append(f"{backend}:{page}")
        top = [
            r for r in measured if (r["backend"], r["page"], r["jobs"]) == (backend, page, largest)
        ]
        emit(
            PART,
            backend=backend,
            page=page,
            queries_by_size=counts,
            constant=same,
            p95_ms_largest=top[0]["p95_ms"] if top else None,
            under_target=bool(top) and top[0]["p95_ms"] <= TARGET_P95_MS,
        )
    at_largest = [r for r in measured if r["jobs"] == largest]
    over = sorted(
        {f"{r['backend']}:{r['page']}" for r in at_largest if r["p95_ms"] > TARGET_P95_MS}
    )
    emit(
        PART,
        measured=sorted({r["page"] for r in measured}),
        over_target=over,
        missing=sorted({r["page"] for r in results if "page" in r and not r["measured"]}),
    )
    per_backend = {
        f"p95_ms_max_{b}": max(r["p95_ms"] for r in at_largest if r["backend"] == b)
        for b in _backends()
        if any(r["backend"] == b for r in at_largest)
    }
    fills = {
        f"fill_s_{r['backend']}": r["fill_s"]
        for r in results
        if r.get("fill") and r["jobs"] == largest
    }
    summary(
        PART,
        jobs=largest,
        p95_ms_max=max(r["p95_ms"] for r in at_largest),
        **per_backend,
        pages_over_target=len(over),
        queries_max=max(r["queries"] for r in measured),
        queries_constant=int(constant),
        queries_grow=len(grow),
        **fills,
    )


if __name__ == "__main__":
    child = os.environ.get("MQ_BENCH_UI_CHILD", "")
    if child:
        backend, url, out = child.split(" ", 2)
        _child(backend, url, Path(out))
    else:
        from types import SimpleNamespace

        run(SimpleNamespace())
