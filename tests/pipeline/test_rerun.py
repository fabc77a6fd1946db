"""Re-running Completed work as a new version: an administrator's re-run of a job or a
batch, and a depositor's resubmission of a Completed batch's batchID with ``rerun``."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied

from batches.models import ApiToken, Profile
from door.rights import grant_depositor
from door.submission import SubmissionError, submit
from merritt_queue.core.treecheck.consistency import check_tree
from merritt_queue.services.storage import LocalStorage
from steering.actions.catalog import ACTIONS
from steering.actions.execution import execute
from tests.pipeline.test_pipeline_e2e import md5

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


@pytest.fixture
def people(django_user_model):
    def make(name, group):
        user = django_user_model.objects.create_user(name, password="pw")
        user.groups.set([Group.objects.get_or_create(name=group)[0]])
        return user

    return {"operator": make("otto", "operator"), "administrator": make("ada", "administrator")}


def act(user, name, item, version, reason="the depositor asked for a new run"):
    return execute(user, ACTIONS[name], [(item, version)], reason, token=uuid.uuid4().hex)


def completed(pipeline, bid):
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    (job,) = pipeline.jobs(bid)
    return batch, job


def new_batch_of(item) -> str:
    """The bid the audit row's detail names."""
    assert item.result == "done", item.detail
    return item.detail.split("re-run as batch ", 1)[1].split()[0]


def test_a_completed_job_re_run_is_unchanged_then_version_2_when_its_bytes_change(
    pipeline, content, people
):
    url = f"{content.url}/call911.jpg"
    bid = pipeline.submit(type="file", payload_url=url, batchID="rerun-me", erc_what="Call")
    _, job = completed(pipeline, bid)
    ark = job.identifiers["primary_id"]
    storage = LocalStorage(pipeline.root / "storage")
    assert storage.versions(ark) == [1]

    with pytest.raises(PermissionDenied):
        act(people["operator"], "job.rerun", job.jid, job.status_version)

    record = act(people["administrator"], "job.rerun", job.jid, job.status_version)
    (item,) = record.items.all()
    again = new_batch_of(item)
    assert "batchID rerun-me~rerun-1" in item.detail and item.before_status == "Completed"
    assert pipeline.store.jobs.get_job(job.jid).status == "Completed"  # the old job stays
    assert pipeline.store.batches.find_batch_by_uuid("rerun-me") == bid  # and its batchID's entry
    batch, rerun_job = completed(pipeline, again)
    assert batch.submission["rerun_of"] == bid and batch.submission["submitted_by"] == "ada"
    assert rerun_job.identifiers["primary_id"] == ark
    assert rerun_job.configuration["rerun_of"] == job.jid
    assert "unchanged: no new version" in rerun_job.message
    assert storage.versions(ark) == [1]

    # The depositor replaced the file at its URL: the next re-run makes version 2.
    (content.root / "call911.jpg").write_bytes((content.root / "4blocks.jpg").read_bytes())
    record = act(people["administrator"], "job.rerun", job.jid, job.status_version)
    (item,) = record.items.all()
    assert "rerun-me~rerun-2" in item.detail
    _, second = completed(pipeline, new_batch_of(item))
    assert storage.versions(ark) == [1, 2]
    stored = {f.name: f for f in storage.get_version(ark, 2).files}
    assert stored["producer/call911.jpg"].digests["md5"] == md5("4blocks.jpg")
    assert second.store["version"] == 2
    assert check_tree(pipeline.store) == []  # the re-run batches and their batchIDs agree


def test_a_completed_batch_re_run_runs_each_of_its_completed_jobs(pipeline, content, people):
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/4blocks.jpg")
    batch, job = completed(pipeline, bid)
    record = act(people["administrator"], "batch.rerun", bid, batch.status_version)
    (item,) = record.items.all()
    again = new_batch_of(item)
    assert f"batchID {bid}~rerun-1" in item.detail  # no batchID: named after the bid
    _, rerun_job = completed(pipeline, again)
    assert rerun_job.identifiers["primary_id"] == job.identifiers["primary_id"]
    # Only Completed items: a re-run batch of a batch still processing is refused.
    pending = pipeline.submit(type="file", payload_url=f"{content.url}/4blocks.jpg")
    status = pipeline.store.batches.get_batch(pending)
    record = act(people["administrator"], "batch.rerun", pending, status.status_version)
    assert record.items.get().result == "skipped"


def test_an_uploaded_payload_is_not_re_run(pipeline, people, tmp_path):
    from door.submission import Upload

    data = b"uploaded bytes"
    path = tmp_path / "up.txt"
    path.write_bytes(data)
    with path.open("rb") as f:
        bid = submit(
            {"profile": "demo", "submitter": "tester", "type": "file"},
            Upload("up.txt", f, len(data)),
        ).bid
    _, job = completed(pipeline, bid)
    record = act(people["administrator"], "job.rerun", job.jid, job.status_version)
    item = record.items.get()
    assert item.result == "failed" and "uploaded" in item.detail


def test_a_completed_batch_id_is_run_again_only_when_rerun_is_asked(pipeline, content):
    data = {"type": "file", "payload_url": f"{content.url}/call911.jpg", "batchID": "b-7"}
    first = pipeline.submit(**data)
    completed(pipeline, first)

    same = submit(data | {"profile": "demo", "submitter": "tester"})
    assert same.duplicate and same.bid == first

    asked = submit(data | {"profile": "demo", "submitter": "tester", "rerun": "true"})
    assert not asked.duplicate and asked.bid != first and asked.batch_uuid == "b-7~rerun-1"
    assert pipeline.store.batches.find_batch_by_uuid("b-7") == first  # MerrittZK's entry unchanged
    assert pipeline.store.batches.get_batch(asked.bid).submission["rerun_of"] == first

    # Sent twice before the new batch completes: the same new batch, not a third.
    twice = submit(data | {"profile": "demo", "submitter": "tester", "rerun": True})
    assert twice.duplicate and twice.bid == asked.bid and twice.batch_uuid == "b-7~rerun-1"

    with pytest.raises(SubmissionError, match="rerun must be true or false"):
        submit(data | {"profile": "demo", "submitter": "tester", "rerun": "maybe"})

    completed(pipeline, asked.bid)
    third = submit(data | {"profile": "demo", "submitter": "tester", "rerun": "1"})
    assert not third.duplicate and third.batch_uuid == "b-7~rerun-2"
    # A depositor cannot take a re-run's batchID for a submission of their own.
    with pytest.raises(SubmissionError, match="batchID may hold"):
        submit(data | {"profile": "demo", "submitter": "tester", "batchID": "b-7~rerun-9"})


def test_the_api_runs_a_completed_batch_id_again_when_asked(client, process_store):
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    user = get_user_model().objects.create_user("depositor", password="pw")
    grant_depositor(user, ["demo"])
    token = ApiToken.issue(user, "tests")[1]
    body = {"profile": "demo", "type": "file", "payload_url": "https://example.org/a.jpg"}

    def post(data):
        return client.post(
            "/api/v1/batches",
            json.dumps(body | data),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )

    first = post({"batchID": "api-1"}).json()["batch_id"]
    assert post({"batchID": "api-1", "rerun": True}).json() == {
        "batch_id": first,
        "batchID": "api-1",
        "duplicate": True,
        "status": "Pending",
        "rerun_possible": False,
    }  # not Completed yet: today's answer
    for status in ("Processing", "Reporting", "Completed"):
        process_store.batch_moves.transition_batch(first, status)
    again = post({"batchID": "api-1", "rerun": True})
    assert again.status_code == 201 and again.json()["batchID"] == "api-1~rerun-1"
    assert post({"batchID": "api-1"}).json()["batch_id"] == first  # without rerun: as today
    refused = post({"batchID": "api-1", "rerun": "yes please"})
    assert (
        refused.status_code == 400 and "rerun must be true or false" in refused.json()["errors"][0]
    )


def test_a_depositors_rerun_is_handed_to_rq_at_once_as_a_first_run_is(pipeline, content):
    from rq import Queue

    from merritt_queue.core.queues import BATCH_PENDING_QUEUE, rq_job_id

    data = {"type": "file", "payload_url": f"{content.url}/call911.jpg", "batchID": "b-8"}
    completed(pipeline, pipeline.submit(**data))
    asked = submit(data | {"profile": "demo", "submitter": "tester", "rerun": "true"})
    waiting = Queue(BATCH_PENDING_QUEUE, connection=pipeline.redis).job_ids
    assert rq_job_id("batch", asked.bid, "Pending") in waiting  # not left to the next sweep
