"""The SQL a job's chain of steps makes: what a one-file job writes, statement by statement,
so that it cannot silently grow back; its profile read once per chain, afresh the next.

The real pipeline (ZooKeeper, Redis, RQ workers in-process, a local HTTP server).
"""

from __future__ import annotations

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext

import jobs.tasks
import mirror.writethrough
from batches.models import Profile
from pipeline import jobhandlers
from pipeline.services import get_services
from tests.pipeline.test_pipeline_e2e import assert_batch_completed, assert_stored, submit_call911

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

# Pending to Notify in one RQ job: the Processing step's profile read; the Recording step's
# new object, version and files in one transaction; the mirror's write-through of the chain
# (mirror/writethrough.py) in another, then what its steps did (mirror/steps.py) in one
# statement. Transaction statements count: they are round trips.
ONE_FILE_JOB = [
    ("SELECT", "batches_profile"),
    ("BEGIN", ""),
    ("INSERT", "inventory_inventoryobject"),
    ("INSERT", "inventory_inventoryversion"),
    ("INSERT", "inventory_inventoryfile"),
    ("COMMIT", ""),
    ("BEGIN", ""),
    ("SELECT", "jobs_job"),
    ("UPDATE", "jobs_job"),
    ("INSERT", "jobs_jobevent"),
    ("SELECT", "notifications_subscription"),
    ("SELECT", "batches_batch"),
    ("UPDATE", "batches_batch"),
    ("COMMIT", ""),
    ("INSERT", "jobs_jobsteps"),
]


def statement(sql: str) -> tuple[str, str]:
    """The verb and first table of a logged statement (executemany's ``N times:`` dropped)."""
    sql = re.sub(r"^\d+ times: ", "", sql)
    table = re.search(r'\b(?:FROM|INTO|UPDATE)\s+"?(\w+)', sql)
    return sql.split()[0].upper(), table.group(1) if table else ""


def test_a_one_file_job_makes_these_statements_and_no_more(pipeline, content, monkeypatch):
    runs = []
    run_job_step = jobs.tasks.run_job_step

    def counted(jid: str, status: str) -> str:
        with CaptureQueriesContext(connection) as queries:
            result = run_job_step(jid, status)
        runs.append((status, result, [statement(q["sql"]) for q in queries.captured_queries]))
        return result

    monkeypatch.setattr(jobs.tasks, "run_job_step", counted)
    # The write-through's freshness row is rewritten once a second per process, in whichever
    # write comes then: on a slow machine, inside this chain. It is not a job's own cost.
    monkeypatch.setattr(mirror.writethrough, "MARK_EVERY", float("inf"))
    bid = submit_call911(pipeline, content)
    pipeline.run(bid)
    (job,) = assert_batch_completed(pipeline, bid, 1)
    assert_stored(pipeline, job, ["call911.jpg"])
    ((status, result, statements),) = runs  # the whole chain in one RQ job
    assert (status, result) == ("Pending", "committed")
    assert statements == ONE_FILE_JOB


def test_a_profile_deleted_mid_chain_fails_processing_as_before(pipeline, content, monkeypatch):
    estimating = jobhandlers.estimating

    def deleting(s, job):
        Profile.objects.filter(name="demo").delete()
        return estimating(s, job)

    monkeypatch.setattr(jobhandlers, "estimating", deleting)
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid, until=lambda b: any(j.status == "Failed" for j in pipeline.jobs(bid)))
    (job,) = pipeline.jobs(bid)
    assert (job.status, job.last_successful_status) == ("Failed", "Downloading")
    assert job.message == "profile 'demo' no longer exists"


def test_a_profile_is_read_once_per_chain_and_afresh_in_the_next(pipeline):
    s = get_services()
    with CaptureQueriesContext(connection) as queries:
        with s.chain():
            assert s.profile("demo").callback_url == ""
            Profile.objects.filter(name="demo").update(callback_url="https://example.org/cb")
            assert s.profile("demo").callback_url == ""
            assert s.profile("nobody") is None and s.profile("nobody") is None
    assert len(queries) == 3  # the update and one read of each profile
    with s.chain():
        assert s.profile("demo").callback_url == "https://example.org/cb"
    # Outside a chain (a step run any other way) nothing is kept.
    Profile.objects.filter(name="demo").update(callback_url="")
    assert s.profile("demo").callback_url == ""
