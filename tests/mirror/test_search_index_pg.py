"""On PostgreSQL the list searches read the pg_trgm GIN indexes the migrations make, with the
same answers as SQLite's FTS5 index (tests/pages/test_search_index.py).

A throw-away cluster (``scripts/services.sh pg-start``, or a new database on the server
``DATABASE_URL`` names), migrated and searched by ``manage.py`` processes of its own: this
test process keeps its SQLite database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg
import pytest

from harness.procs import REPO
from tests.pgdatabase import new_database
from tests.procs import TEST_SECRET_KEY

# Made, searched and explained in the manage.py process on PostgreSQL; prints JSON.
SCRIPT = r"""
import json
import os
from django.db import connection
from django.utils import timezone
from batches.filters import BatchFilter
from batches.models import Batch
from inventory.filters import ObjectFilter
from inventory.models import InventoryObject
from jobs.filters import JobFilter
from jobs.models import Job

now = timezone.now()
Batch.objects.create(bid="bid0000000001", uuid="Spring-Postcards", title="Motel Capri manifest",
                     message="manifest read", read_at=now, submission={})
Batch.objects.create(bid="bid0000000002", uuid="c0ffee", read_at=now, submission={})
Job.objects.create(jid="jid0000000001", batch_id="bid0000000001", read_at=now,
                   message='md5 Mismatch for "page 3.tif"', ark="ark:/13030/m5zx9qv7ab",
                   local_id="UCSF-Brain-0042", title="Das Haus (1927)")
Job.objects.create(jid="jid0000000002", batch_id="bid0000000002", read_at=now, local_id="ab",
                   message="ab ab ab")
InventoryObject.objects.create(ark="ark:/99999/fk4a", title="Chicken soup")

LISTS = {"jobs": (JobFilter, Job, "jid"), "batches": (BatchFilter, Batch, "bid"),
         "objects": (ObjectFilter, InventoryObject, "ark")}

def listed(kind, data):
    filter_class, model, key = LISTS[kind]
    return filter_class(data, queryset=model.objects.all()).qs

found = {}
for kind, data in json.loads(os.environ["CASES"]):
    rows = listed(kind, data).values_list(LISTS[kind][2], flat=True)
    found[f"{kind} {json.dumps(data)}"] = sorted(rows)
plans = {}
with connection.cursor() as cursor:
    # Few rows: else reading them all, in a table's or an index's order, is cheapest.
    cursor.execute("SET enable_seqscan = off")
    cursor.execute("SET enable_indexscan = off")
for kind, data in json.loads(os.environ["PLANS"]):
    plans[f"{kind} {json.dumps(data)}"] = listed(kind, data).order_by("-id")[:25].explain()
print("RESULT " + json.dumps({"found": found, "plans": plans}))
"""

CASES = {
    ("jobs", '{"q": "MD5 MISMATCH"}'): ["jid0000000001"],
    ("jobs", '{"q": "zx9qv"}'): ["jid0000000001"],
    ("jobs", '{"q": "brain-00"}'): ["jid0000000001"],
    ("jobs", '{"q": "spring-post"}'): ["jid0000000001"],
    ("jobs", '{"q": "https://n2t.net/ark:/13030/M5ZX9"}'): ["jid0000000001"],
    ("jobs", '{"q": "\\"page 3"}'): ["jid0000000001"],
    ("jobs", '{"q": "(1927)"}'): ["jid0000000001"],
    ("jobs", '{"q": "%_%"}'): [],
    ("jobs", '{"q": "ab"}'): ["jid0000000002"],  # short: the exact local id only
    ("jobs", '{"q": "md"}'): [],
    ("jobs", '{"message": "MISMATCH"}'): ["jid0000000001"],
    ("jobs", '{"message": "Haus"}'): [],
    ("batches", '{"q": "MANIFEST"}'): ["bid0000000001"],
    ("batches", '{"q": "id0000000002"}'): ["bid0000000002"],
    ("batches", '{"q": "c0"}'): [],
    ("objects", '{"q": "CHICKEN"}'): ["ark:/99999/fk4a"],
}
PLANS = {
    ("jobs", '{"q": "nothing-like-this"}'): "jobs_job_search",
    ("jobs", '{"message": "mismatch"}'): "jobs_job_search",
    ("batches", '{"q": "manifest"}'): "batches_batch_search",
    ("objects", '{"q": "chicken soup"}'): "inventory_inventoryobject_search",
}


@pytest.fixture(scope="module")
def pg_database():
    """The URL of a new, empty PostgreSQL database, dropped afterwards."""
    with new_database("mq_search") as url:
        yield url


def _manage(url: str, *args: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=os.environ | {"DATABASE_URL": url, "SECRET_KEY": TEST_SECRET_KEY} | env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_postgresql_searches_the_same_way_through_its_trigram_indexes(pg_database):
    _manage(pg_database, "migrate", "--verbosity=0")
    with psycopg.connect(pg_database) as conn:
        names = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes").fetchall()}
        assert conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'").fetchone()
    assert set(PLANS.values()) <= names
    out = _manage(
        pg_database,
        "shell",
        "-c",
        SCRIPT,
        CASES=json.dumps([[kind, json.loads(data)] for kind, data in CASES]),
        PLANS=json.dumps([[kind, json.loads(data)] for kind, data in PLANS]),
    )
    result = json.loads(out.split("RESULT ", 1)[1])
    for (kind, data), expected in CASES.items():
        assert result["found"][f"{kind} {json.dumps(json.loads(data))}"] == expected, (kind, data)
    for (kind, data), index in PLANS.items():
        plan = result["plans"][f"{kind} {json.dumps(json.loads(data))}"]
        assert f"Bitmap Index Scan on {index}" in plan, plan
        assert "Seq Scan" not in plan, plan
