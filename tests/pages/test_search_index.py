"""The job, batch and object lists search through the text index (mirror.textindex): any part
of a text in any case, a link to an ARK, any character typed, and no read of every row."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.db import connection

from batches.filters import BatchFilter
from batches.models import Batch
from inventory.filters import ObjectFilter
from inventory.models import InventoryObject
from jobs.filters import JobFilter
from jobs.models import Job
from mirror import textindex
from tests.pages.test_pages_batches_jobs import (  # noqa: F401
    bid,
    browser,
    jid,
    listed,
    make_batch,
    make_job,
    user,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def found(browser):  # noqa: F811
    def ids(url: str) -> list[str]:
        response = browser.get(url)
        assert response.status_code == 200, url
        return listed(response)

    return ids


@pytest.fixture
def jobs():
    make_batch(1, uuid="Spring-Postcards-2026")
    make_batch(2, uuid="c0ffee", title="Motel Capri manifest", message="manifest read")
    make_job(1, message='md5 mismatch for "page 3.tif"')
    make_job(2, ark="ark:/13030/m5zx9qv7ab", local_id="UCSF-Brain-0042")
    make_job(3, batch=2, title="Das Über-Haus (1927)")
    make_job(4, message="unreachable: NEAR the AND gate -x *y")
    make_job(5, ark="ark:/99999/fk4j5")


@pytest.mark.parametrize(
    "query, expected",
    [
        ("q=MD5 MISMATCH", [1]),  # any case
        ("q=Mismatch for", [1]),
        ("q=zx9qv", [2]),  # the middle of an ARK
        ("q=brain-00", [2]),  # the middle of a local id, in another case
        ("q=d0000000002", [3]),  # the middle of a job's batch id
        ("q=postcards-20", [5, 4, 2, 1]),  # the middle of the batch's batchID
        ("q=über-haus", [3]),
        ("q=https://n2t.net/ark:/13030/m5zx9qv7ab", [2]),
        ("q=https://arks.org/ark:/13030/M5ZX9QV7AB/", [2]),
        ("q=http://n2t.net/ark:/13030/m5zx9", [2]),  # a link to the start of an ARK
        ("q=ark:/13030/m5zx", [2]),
        ("q=https://n2t.net/ark:/99999/fk4j5", [5]),  # exactly a job's ARK
        ("message=MISMATCH", [1]),
        ("message=Object", []),  # in titles, not messages
    ],
)
def test_the_job_search_finds_any_part_in_any_case(found, jobs, query, expected):
    assert found(f"/jobs/?{query}") == [jid(n) for n in expected]


@pytest.mark.parametrize(
    "typed",
    [
        '"',
        '"page 3',
        '"page 3.tif"',
        "*y",
        "-x",
        "gate -x *y",
        "NEAR the",
        "the AND gate",
        "title: x",
        "(1927)",
        "a OR b",
        "^md5",
        "'",
        "\\",
        "{title}:md5",
        "%_%",
    ],
)
def test_any_character_typed_is_text_to_find_never_query_syntax(found, jobs, typed):
    expected = {
        '"page 3': [1],
        '"page 3.tif"': [1],
        "gate -x *y": [4],
        "NEAR the": [4],
        "the AND gate": [4],
        "(1927)": [3],
    }.get(typed, [])
    assert found(f"/jobs/?q={quote(typed)}") == [jid(n) for n in expected]
    assert found(f"/jobs/?message={quote(typed)}") == [jid(n) for n in expected if n != 3]
    assert found(f"/batches/?q={quote(typed)}") == []


def test_a_query_shorter_than_three_characters_finds_exact_identifiers_only(found, jobs):
    make_job(6, local_id="ab", message="ab ab ab")
    assert found("/jobs/?q=ab") == [jid(6)]  # the local id, not every text holding "ab"
    assert found("/jobs/?q=md") == []
    assert found("/jobs/?q=3") == [jid(3)]  # a short job id, as before
    assert found("/jobs/?message=ab") == []
    assert found("/batches/?q=2") == [bid(2)]
    assert found("/batches/?q=c0") == []


@pytest.mark.parametrize(
    "query, expected",
    [
        ("q=MANIFEST", [2]),  # title and message, any case
        ("q=id0000000001", [1]),  # the middle of a batch id
        ("q=spring-post", [1]),
        ("q=C0FFEE", [2]),
        ("q=manifest read", [2]),
    ],
)
def test_the_batch_search_finds_any_part_in_any_case(found, jobs, query, expected):
    assert found(f"/batches/?{query}") == [bid(n) for n in expected]


def _plan(sql: str, params) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return " | ".join(str(row[-1]) for row in cursor.fetchall())


@pytest.mark.parametrize(
    "filter_class, model, data, table",
    [
        (JobFilter, Job, {"q": "nothing-like-this"}, "jobs_job"),
        (JobFilter, Job, {"q": "https://n2t.net/ark:/13030/m5zx9"}, "jobs_job"),
        (JobFilter, Job, {"message": "mismatch", "status": ["Pending"]}, "jobs_job"),
        (BatchFilter, Batch, {"q": "manifest"}, "batches_batch"),
        (ObjectFilter, InventoryObject, {"q": "chicken soup"}, "inventory_inventoryobject"),
    ],
)
def test_a_text_search_reads_the_text_index_never_every_row(jobs, filter_class, model, data, table):
    if connection.vendor != "sqlite":
        pytest.skip("tests/mirror/test_search_index_pg.py reads PostgreSQL's plans")
    qs = filter_class(data, queryset=model.objects.all()).qs
    sql, params = qs.order_by(*model._meta.ordering or ["-id"])[:25].query.sql_with_params()
    plan = _plan(sql, params)
    assert f"{table}_search VIRTUAL TABLE INDEX" in plan, plan
    assert f"SCAN {table}" not in plan.replace(f"SCAN {table}_search", ""), plan


def test_a_text_most_jobs_hold_is_found_by_walking_the_list_in_its_order(found, jobs, monkeypatch):
    monkeypatch.setattr(textindex, "MANY", 3)
    for n in range(6, 12):
        make_job(n, title=f"Postcard {n}" if n % 2 else f"Letter {n}")
    assert found("/jobs/?q=letter") == [jid(10), jid(8), jid(6)]
    assert found("/jobs/?q=object num&per_page=2") == [jid(5), jid(4)]
    assert found("/jobs/?q=object num&per_page=2&page=2") == [jid(2), jid(1)]
    qs = JobFilter({"q": "object num"}, queryset=Job.objects.all()).qs
    if connection.vendor == "sqlite":
        plan = _plan(*qs.order_by("-jid")[:25].query.sql_with_params())
        assert "SCAN jobs_job USING INDEX sqlite_autoindex_jobs_job_1" in plan, plan  # jid's
        assert "TEMP B-TREE" not in plan, plan
