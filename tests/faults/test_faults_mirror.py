"""The mirror database is lost (its SQLite file removed) with one batch done and one mid-flight.

ZooKeeper holds every batch and job, and each one's history node, so ``migrate`` and
``reconcile --full`` bring back the same mirror rows and timeline rows, field by field.
What lives only in the database (profiles, the local inventory) is not in ZooKeeper: the
test puts the profile back as an operator restoring the configuration would, and the
restored mirror must equal the one before the loss.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from merritt_queue.services.storage import LocalStorage
from tests.cluster import batch_jobs, serve_batch, wait_final, wait_mid_batch

pytest_plugins = ["tests.cluster", "tests.httpserver"]
pytestmark = pytest.mark.faults

BATCH_FIELDS = (
    "bid uuid collection profile submitter type title submitted status message last_modified "
    "submission status_report acquired locked job_counts job_total status_version"
).split()
JOB_FIELDS = (
    "jid bid collection profile submitter status last_successful_status retry_count priority "
    "space_needed local_id ark title message last_modified configuration identifiers metadata "
    "inventory store locked status_version"
).split()


EVENT_FIELDS = "status_version at from_status to_status message retry_count actor exact".split()


def timeline(db) -> dict[str, list[tuple]]:
    """Every item's timeline rows (``JobEvent``, ``BatchEvent``), by id, in version order."""
    with sqlite3.connect(db) as conn:
        jobs = conn.execute(
            f"SELECT jid, {', '.join(EVENT_FIELDS)} FROM jobs_jobevent ORDER BY jid, status_version"
        ).fetchall()
        fields = ", ".join(f for f in EVENT_FIELDS if f != "retry_count")
        batches = conn.execute(
            f"SELECT bid, {fields} FROM batches_batchevent ORDER BY bid, status_version"
        ).fetchall()
    rows: dict[str, list[tuple]] = {}
    for item_id, *values in [*jobs, *batches]:
        rows.setdefault(item_id, []).append(tuple(values))
    return rows


def mirror(db) -> dict[str, dict]:
    """Every batch and job row of the mirror, keyed by id, JSON fields decoded."""
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        batches = conn.execute(f"SELECT {', '.join(BATCH_FIELDS)} FROM batches_batch").fetchall()
        jobs = conn.execute(f"SELECT {', '.join(JOB_FIELDS)} FROM jobs_job").fetchall()
    rows = {}
    for row in [*batches, *jobs]:
        record = {k: _decoded(row[k]) for k in row.keys()}
        rows[record.get("jid") or record["bid"]] = record
    return rows


def _decoded(value):
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def test_the_mirror_is_rebuilt_after_its_database_is_deleted(cluster, store, http_server):
    done_manifest = serve_batch(http_server, 3)
    cluster.worker("worker1")
    cluster.dispatcher()
    done = cluster.submit(type="single-file-batch-manifest", payload_url=done_manifest)
    wait_final(cluster, store, done)
    flight_manifest = serve_batch(http_server, 8, delay=0.5)
    flight = cluster.submit(type="single-file-batch-manifest", payload_url=flight_manifest)
    wait_mid_batch(cluster, store, flight, 8)
    cluster.stop_all()  # a warm stop: each worker finishes its step, so no lock is held
    before = mirror(cluster.db)
    events_before = timeline(cluster.db)
    assert {done, flight} <= set(before)
    assert before[flight]["status"] == "Processing"

    for suffix in ("", "-wal", "-shm"):
        cluster.db.with_name(cluster.db.name + suffix).unlink(missing_ok=True)
    cluster.set_up_database()
    report = cluster.manage("reconcile", "--full")
    after = mirror(cluster.db)

    assert sorted(after) == sorted(before), report
    for item_id, row in before.items():
        for name, value in row.items():
            assert after[item_id][name] == value, (item_id, name, value, after[item_id][name])
    assert len(batch_jobs(store, done)) + len(batch_jobs(store, flight)) == len(after) - 2
    # The timeline too, field by field: every row came from the history nodes, so the
    # rebuild makes the very rows the workers' write-through and the follower made.
    events_after = timeline(cluster.db)
    assert sorted(events_after) == sorted(events_before), report
    for item_id, rows in events_before.items():
        assert events_after[item_id] == rows, item_id

    # The queue carries on with the restored mirror; the mirror follows to the end.
    cluster.worker("worker2")
    cluster.dispatcher()
    batch = wait_final(cluster, store, flight, timeout=120)
    assert batch.status == "Completed", cluster.logs()
    storage = LocalStorage(cluster.storage_root)
    arks = set()
    for jid in batch_jobs(store, flight):
        job = store.jobs.get_job(jid)
        assert job.status == "Completed" and job.retry_count == 0
        arks.add(job.identifiers["primary_id"])
        assert storage.versions(job.identifiers["primary_id"]) == [1]
    assert len(arks) == 8 and cluster.minted() == 11
    assert [path for path, _ in store.locks.nodes()] == []
    assert "changed: 0" in cluster.manage("reconcile", "--full")
