"""Local ids in a Merritt mode: found in and told to Merritt's local-id service, as Merritt's
own ingest does (mrt-ingest ``LocalIDUtil``: looked up before minting, bound before storing).

Before, they lived in this project's tables only: an object Merritt's ingest had made under a
local id got a second ARK from us, and Merritt's next ingest of one of our local ids minted
another object again.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from merritt_queue.core import stepowners
from tests.pipeline.test_pipeline_failures import only_job

pytest_plugins = ["tests.httpserver", "tests.pipelinerun", "tests.merrittinventory"]

pytestmark = pytest.mark.usefixtures("loopback_only")

OWNER = "ark:/13030/j2cc0900"
MERRITTS = "ark:/99999/fk4merritt1"


@pytest.fixture
def owned(pipeline):
    pipeline.profile.owner_ark = OWNER
    pipeline.profile.save()


def test_a_local_id_merritt_has_bound_makes_a_version_of_that_object_not_a_new_one(
    pipeline,
    content,
    merritt_api,
    owned,
):
    merritt_api.localids[(OWNER, "lid-7")] = MERRITTS
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg", local_id="lid-7")
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Completed" and job.status == "Completed", job.message
    assert job.identifiers["primary_id"] == MERRITTS
    (lookup, *_) = merritt_api.localid_requests()
    assert lookup.method == "GET"
    assert lookup.path == f"/inventory/primary/{quote(OWNER, safe='')}/lid-7?t=json"


def test_a_minted_object_s_local_ids_are_told_to_merritt_before_it_is_stored(
    pipeline,
    content,
    merritt_api,
    merritt_storage_server,
    owned,
):
    bid = pipeline.submit(
        type="file", payload_url=f"{content.url}/call911.jpg", local_id="lid-8; lid-9"
    )
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Completed" and job.status == "Completed", job.message
    ark = job.identifiers["primary_id"]
    assert merritt_api.localids == {(OWNER, "lid-8"): ark, (OWNER, "lid-9"): ark}
    posts = [r for r in merritt_api.localid_requests() if r.method == "POST"]
    assert [r.path for r in posts] == [
        f"/inventory/primary/{quote(ark, safe='')}/{quote(OWNER, safe='')}/lid-8%3Blid-9?t=json"
    ]
    assert len(merritt_storage_server.objects[ark]) == 1


def test_the_local_id_service_down_keeps_processing_waiting_then_one_object_is_made(
    pipeline,
    content,
    merritt_api,
    merritt_storage_server,
    owned,
):
    merritt_api.localid_fail_next = [503, 503]
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg", local_id="lid-5")

    def waiting(_batch):
        jobs = pipeline.jobs(bid)
        return bool(jobs) and "local-id service" in jobs[0].message

    pipeline.run(bid, until=waiting, timeout=30)
    job = only_job(pipeline, bid)
    assert job.status == "Processing", job.message
    assert "could not answer for local id lid-5 (503" in job.message
    assert job.message.endswith("db down; asking again later")
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Completed" and job.status == "Completed", job.message
    ark = job.identifiers["primary_id"]
    assert list(merritt_storage_server.objects) == [ark]
    assert merritt_api.localids == {(OWNER, "lid-5"): ark}


def test_a_local_job_asks_merritt_nothing(pipeline, content, merritt_api, owned):
    pipeline.profile.store_record = stepowners.LOCAL
    pipeline.profile.save()
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg", local_id="lid-6")
    batch = pipeline.run(bid)
    assert batch.status == "Completed", only_job(pipeline, bid).message
    assert merritt_api.localid_requests() == []
