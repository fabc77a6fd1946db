"""How SQLite plans the list pages' queries over a mirror of a million jobs, most of them
finished: with the statistics ``ANALYZE`` wrote for such a mirror (bench ui's fill), loaded
into a small test database, the planner makes the choices it makes there. Timing belongs to
``make bench BENCH=ui``; this checks the plans that decide it."""

from __future__ import annotations

import pytest
from django.db import connection

from jobs.filters import JobFilter
from jobs.models import Job
from tests.pages.test_pages_batches_jobs import make_job

pytestmark = pytest.mark.django_db

# sqlite_stat1 of a 1,000,000-job mirror (74 % Completed): each index's rows, then the
# average rows per distinct value of its leading columns. Without a histogram, SQLite takes
# every status for an average one.
MILLION = {
    "jobs_job_status_da8353_idx": "1000000 83334 52632",
    "jobs_job_status_6a2aac_idx": "1000000 83334 43479",
    "jobs_job_status_17f7c3_idx": "1000000 83334 1",
    "jobs_job_status_8d2fc4_idx": "1000000 83334 27778 1",
    "job_bulk_summary": "1000000 83334 2258 2233 1374 1374",
    "jobs_job_ark_71917beb": "1000000 1",
    "jobs_job_local_id_51fc4aa1": "1000000 1",
    "sqlite_autoindex_jobs_job_1": "1000000 1",
}


@pytest.fixture
def million():
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL keeps a histogram of each column: its own plans differ")
    for n in range(1, 6):
        make_job(n, ark=f"ark:/13030/m5zx9q{n}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'jobs_job'")
        for index, stat in MILLION.items():
            cursor.execute(
                "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('jobs_job', %s, %s)",
                [index, stat],
            )
        cursor.execute("ANALYZE sqlite_schema")  # the planner reads the statistics again
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM sqlite_stat1")
        cursor.execute("ANALYZE sqlite_schema")


def _plan(data: dict) -> str:
    qs = JobFilter(data, queryset=Job.objects.all()).qs.order_by("-jid")
    sql, params = qs.values("pk")[:26].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN SELECT COUNT(*) FROM ({sql})", params)
        return " | ".join(str(row[-1]) for row in cursor.fetchall())


def _reads_every_row(plan: str) -> bool:
    return any(step.strip() == "SCAN jobs_job" for step in plan.split("|")) or (
        "SCAN jobs_job USING" in plan and "jobs_job_search" not in plan
    )


@pytest.mark.parametrize("reason", ["worker", "storage_lock", "queue_paused"])
def test_a_waiting_list_reads_the_unfinished_jobs_only(million, reason):
    plan = _plan({"waiting": reason})
    assert not _reads_every_row(plan), plan


def test_the_start_of_an_ark_is_a_seek_on_the_ark_index_not_the_text_index(million):
    plan = _plan({"q": "13030/M5ZX9"})
    assert "jobs_job_ark" in plan, plan
    assert "jobs_job_search" not in plan, plan
