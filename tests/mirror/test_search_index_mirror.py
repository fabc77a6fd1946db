"""The text index (mirror.textindex) stays in step with every writer of the mirror: the
write-through, the follower, the full rebuild, the ORM and raw SQL; ``reconcile --full``
makes it again when something wrote around it."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection

from batches.models import Batch
from jobs.models import Job
from merritt_queue.core import tree as t
from mirror import facade as mirror
from tests.mirrorlive import make_jobs, wait_for

pytest_plugins = ["tests.mirrorlive"]


@pytest.fixture(autouse=True)
def _sqlite(db):
    if connection.vendor != "sqlite":
        pytest.skip("the FTS5 index is SQLite's; tests/mirror/test_search_index_pg.py")


def indexed(text: str, table: str = "jobs_job") -> list[str]:
    """The keys of the rows the index itself answers for ``text`` (not the table's text)."""
    key = "jid" if table == "jobs_job" else "bid"
    phrase = '"' + text.replace('"', '""') + '"'
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t.{key} FROM {table}_search s JOIN {table} t ON t.id = s.rowid "
            f"WHERE {table}_search MATCH %s ORDER BY t.{key}",
            [phrase],
        )
        return [row[0] for row in cursor.fetchall()]


def in_step(table: str = "jobs_job") -> None:
    """FTS5's own check of the index against its table's rows: raises when they differ."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table}_search({table}_search, rank) VALUES ('integrity-check', 1)"
        )


def test_the_write_through_keeps_the_index_in_step(live, db):
    bid, (jid, other) = make_jobs(live, 2)
    assert indexed("conf") == [] and indexed(bid[3:]) == sorted([jid, other])
    live.job_data.save_job_data(
        jid, "identifiers", {"primary_id": "ark:/13030/m5ZX9qv7", "local_id": ["UCSF-0042"]}
    )
    live.moves.transition_job(jid, "Estimating", "md5 Mismatch in page-3.tif")
    assert indexed("zx9QV") == [jid]
    assert indexed("ucsf-00") == [jid]
    assert indexed("MISMATCH IN PAGE") == [jid]
    live.moves.transition_job(jid, "Failed", "the store refused it")
    assert indexed("mismatch") == [] and indexed("store refused") == [jid]
    live.moves.hold_job(other)
    live.moves.delete_job(other)
    live.removal.purge_job(other)
    assert indexed(bid[3:]) == sorted([jid, other])  # its row stays, found as history
    assert indexed("A batch", "batches_batch") == [bid]
    in_step()
    in_step("batches_batch")


def test_the_orm_and_raw_sql_keep_the_index_in_step(db):
    Batch.objects.bulk_create(
        [Batch(bid=f"bid{n:010d}", uuid=f"Spring-{n}", read_at="2026-11-27T00:00Z") for n in (1, 2)]
    )
    Job.objects.bulk_create(
        [
            Job(jid=f"jid{n:010d}", title=f"Postcard {n}", read_at="2026-11-27T00:00Z")
            for n in range(1, 4)
        ]
    )
    assert indexed("postcard 2") == ["jid0000000002"]
    assert indexed("SPRING-2", "batches_batch") == ["bid0000000002"]
    Job.objects.filter(jid="jid0000000002").update(title="Letter two")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE jobs_job SET message = 'unreachable host' WHERE jid = 'jid0000000003'"
        )
        cursor.execute("UPDATE jobs_job SET status = 'Failed'")  # no text changed
    Job.objects.filter(jid="jid0000000001").delete()
    Batch.objects.filter(bid="bid0000000001").delete()
    assert indexed("postcard") == ["jid0000000003"]
    assert indexed("letter TWO") == ["jid0000000002"]
    assert indexed("reachable") == ["jid0000000003"]
    assert indexed("spring", "batches_batch") == ["bid0000000002"]
    in_step()
    in_step("batches_batch")


def test_the_follower_keeps_the_index_in_step(store, zk, follower):
    bid, (jid,) = make_jobs(store, 1)
    follower()
    wait_for(lambda: indexed(bid[3:]) == [jid])  # the follower's thread may hold the table
    status = t.job_status_record("Held", "Pending", 0, "held by MerrittZK for checksum review")
    zk.set(t.job_node(jid, "status"), t.encode_json(status))
    zk.delete(t.job_index("Pending", 5, jid))
    zk.create(t.job_index("Held", 5, jid))
    wait_for(lambda: indexed("checksum review") == [jid])
    in_step()


def test_reconcile_full_makes_the_index_again(store, live, db):
    bid, (jid,) = make_jobs(store, 1)
    mirror.full_reconcile(store)
    assert indexed(bid[3:]) == [jid]
    with connection.cursor() as cursor:  # as a copy of the database made without it would be
        cursor.execute("INSERT INTO jobs_job_search(jobs_job_search) VALUES ('delete-all')")
        cursor.execute(
            "INSERT INTO batches_batch_search(batches_batch_search) VALUES ('delete-all')"
        )
    assert indexed(bid[3:]) == [] and indexed("A batch", "batches_batch") == []
    call_command("reconcile", "--full", stdout=io.StringIO())
    assert indexed(bid[3:]) == [jid]
    assert indexed("A batch", "batches_batch") == [bid]
    in_step()
