"""Pages over a large mirror: what they read must not grow with the number of jobs.

A million jobs cannot be made in a test; these check the cause instead: a count that
stops at a cap, a plan that uses an index, an aggregate read from the cache.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches.models import Batch
from dashboard import queries
from jobs.models import Job
from tests.roles import viewer
from ui.listing import CappedPaginator

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)


@pytest.fixture
def browser(client, django_user_model):
    client.force_login(viewer(django_user_model.objects.create_user("librarian")))
    return client


def make_jobs(n: int, status: str = "Completed", start: int = 1) -> None:
    Batch.objects.get_or_create(
        bid="bid0000000001", defaults={"status": "Completed", "collection": "demo", "read_at": NOW}
    )
    Job.objects.bulk_create(
        Job(
            jid=f"jid{i:010d}",
            batch_id="bid0000000001",
            collection="demo",
            status=status,
            last_modified=NOW - timedelta(minutes=i),
            read_at=NOW,
        )
        for i in range(start, start + n)
    )


def sql_of(browser, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        assert browser.get(url).status_code == 200
    return [q["sql"] for q in ctx.captured_queries]


def test_a_list_counts_its_rows_only_up_to_the_cap(browser, monkeypatch):
    monkeypatch.setattr(CappedPaginator, "cap", 4)
    make_jobs(6)
    sql = sql_of(browser, "/jobs/?per_page=2")
    counts = [q for q in sql if "COUNT(" in q.upper() and "jobs_job" in q]
    assert counts and all("LIMIT 5" in q for q in counts), counts
    page = browser.get("/jobs/?per_page=2").content.decode()
    assert "More than 4 jobs" in page
    assert "page 1 of the first 2" in page
    # Under the cap, the count is exact as before.
    monkeypatch.setattr(CappedPaginator, "cap", 10)
    assert "6 jobs" in browser.get("/jobs/").content.decode()


def test_the_batch_list_counts_up_to_the_cap_too(browser, monkeypatch):
    monkeypatch.setattr(CappedPaginator, "cap", 1)
    for n in (1, 2, 3):
        Batch.objects.create(bid=f"bid{n:010d}", status="Completed", read_at=NOW)
    assert "More than 1 batches" in browser.get("/batches/").content.decode()


def test_the_dashboard_counts_settled_jobs_from_the_cache_and_the_rest_each_time(browser):
    cache.clear()
    make_jobs(5, "Completed")
    make_jobs(2, "Failed", start=10)
    browser.get("/")
    make_jobs(3, "Completed", start=20)
    make_jobs(1, "Failed", start=30)
    Job.objects.filter(jid="jid0000000010").update(status="Pending")
    sql = sql_of(browser, "/")
    by_status = [q for q in sql if 'FROM "jobs_job"' in q and "GROUP BY" in q and "COUNT" in q]
    whole = [q for q in by_status if "WHERE" not in q]
    assert not whole, whole  # no GROUP BY over every job while the cache holds it
    # Failed and Pending are counted now; Completed as the cache has it, for a minute.
    assert queries.status_counts(Job) == {"Completed": 5, "Failed": 2, "Pending": 1}


def plan_of(queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return " | ".join(str(row[-1]) for row in cursor.fetchall())


def test_the_locks_page_finds_the_locked_jobs_by_their_index_not_a_scan(browser):
    make_jobs(3)
    Job.objects.filter(jid="jid0000000002").update(locked=True)
    assert [j.jid for j in queries.running_jobs()[0]] == ["jid0000000002"]
    sql = [q for q in sql_of(browser, "/locks/") if 'FROM "jobs_job"' in q and "locked" in q]
    found = Job.objects.filter(locked=True).order_by("last_modified")[:501]
    assert any('ORDER BY "jobs_job"."last_modified"' in q for q in sql), sql
    plan = plan_of(found)
    # The partial index holds the locked rows alone: walking it reads no other job.
    assert "USING INDEX job_locked" in plan, plan


def test_the_quarantined_list_counts_failures_from_one_index_not_per_failed_job(browser):
    make_jobs(2, "Failed")
    sql = sql_of(browser, "/jobs/?quarantined=1")
    (grouped,) = [q for q in sql if 'FROM "jobs_jobevent"' in q and "HAVING" in q]
    assert '"jobs_job"' not in grouped, grouped  # no lookup of each Failed job
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {grouped}")
        plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
    assert "COVERING INDEX jobevent_status_jid" in plan, plan
