"""Pages over a large mirror: what they read must not grow with the number of jobs.

A million jobs cannot be made in a test; these check the cause instead: a count that
stops at a cap, a plan that uses an index, an aggregate read from the cache.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches.models import Batch
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
