"""``merritt-api`` mode: our workers store through Merritt storage's API and record through
Merritt inventory's, beside our own inventory tables.

The pipeline runs for real (tests/pipelinerun.py) against the Merritt storage stand-in
(harness/merrittstore.py) and an inventory stand-in answering in mrt-inventory's
shapes (tests/merrittinventory.py); the site's own MQ_STORAGE stays ``local`` throughout, so a
job that stores anywhere but Merritt storage shows.
"""

from __future__ import annotations

import pytest

from inventory.models import InventoryVersion
from merritt_queue.services.errors import InventoryError
from merritt_queue.services.merrittinventory import MerrittInventoryClient, storage_manifest_url
from pipeline import services
from tests.pipeline.test_pipeline_failures import closed_port_url, only_job

pytest_plugins = ["tests.httpserver", "tests.pipelinerun", "tests.merrittinventory"]

pytestmark = pytest.mark.usefixtures("loopback_only")


def test_a_merritt_api_job_is_stored_in_merritt_storage_and_added_to_merritt_inventory_once(
    pipeline, content, merritt_storage_server, merritt_api, settings
):
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Completed" and job.status == "Completed", job.message
    ark = job.identifiers["primary_id"]
    assert len(merritt_storage_server.objects[ark]) == 1 and job.store["version"] == 1
    (request,) = merritt_api.add_requests()
    manifest = f"{merritt_storage_server.url}/manifest/{merritt_storage_server.node}/"
    manifest += ark.replace(":", "%3A").replace("/", "%2F")
    assert merritt_api.sent(request) == {
        "url": manifest,
        "responseForm": "json",
        "checkVersion": "true",
    }
    assert [(a.ark, a.versions) for a in merritt_api.adds] == [(ark, 1)]
    # Our own tables too: this project's pages read them.
    assert InventoryVersion.objects.filter(obj__ark=ark, number=1).count() == 1
    assert not (pipeline.root / "storage").exists(), "stored under MQ_STORAGE_ROOT too"


def test_a_lost_reply_from_inventory_is_retried_into_one_recorded_version(
    pipeline, content, merritt_api
):
    merritt_api.lose_replies = 1
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Completed" and job.status == "Completed", job.message
    ark = job.identifiers["primary_id"]
    assert len(merritt_api.add_requests()) == 2
    assert [(a.ark, a.versions) for a in merritt_api.adds] == [(ark, 1)]
    assert merritt_api.held == {ark: 1}
    assert InventoryVersion.objects.filter(obj__ark=ark).count() == 1


def test_inventory_down_keeps_the_job_in_recording_with_a_clear_message_then_it_completes(
    pipeline, content, merritt_api, settings
):
    settings.MERRITT_INVENTORY_URL = closed_port_url()
    services.reset()
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")

    def waiting_in_recording(batch):
        jobs = pipeline.jobs(bid)
        return bool(jobs) and jobs[0].status == "Recording" and "inventory" in jobs[0].message

    pipeline.run(bid, until=waiting_in_recording, timeout=30)
    job = only_job(pipeline, bid)
    assert job.message.startswith(f"Merritt inventory at {settings.MERRITT_INVENTORY_URL}")
    assert "connection refused" in job.message and "MERRITT_INVENTORY_URL" in job.message
    assert "Traceback" not in job.message
    assert [p for p, _ in pipeline.store.locks.nodes()] == [], "the inventory lock was left behind"

    settings.MERRITT_INVENTORY_URL = merritt_api.url
    services.reset()
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Completed" and job.status == "Completed", job.message
    assert [a.ark for a in merritt_api.adds] == [job.identifiers["primary_id"]]


def test_a_refused_add_fails_the_job_naming_merritt_inventory_and_what_it_said(
    pipeline, content, merritt_api
):
    merritt_api.held_elsewhere = 5  # inventory holds more versions than storage lists
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert job.status == "Failed" and job.last_successful_status == "Storing"
    assert job.message.startswith(f"Merritt inventory at {merritt_api.url} refused the add of")
    assert "(400 Bad Request): REQUEST_INVALID" in job.message
    assert "db version count exceeds passed map version" in job.message
    assert "Traceback" not in job.message
    assert merritt_api.adds == []
    assert not InventoryVersion.objects.filter(obj__ark=job.identifiers["primary_id"]).exists()
    assert [p for p, _ in pipeline.store.locks.nodes()] == [], "the inventory lock was left behind"


# -- the client alone --------------------------------------------------------------------


def test_the_manifest_url_is_storages_own_with_the_ark_encoded_whole():
    url = storage_manifest_url("https://store.example.org/store/", 9501, "ark:/13030/m5abc")
    assert url == "https://store.example.org/store/manifest/9501/ark%3A%2F13030%2Fm5abc"


def test_adding_again_is_a_success_and_a_5xx_is_retryable(merritt_inventory_server):
    inv = merritt_inventory_server
    inv.versions_of = lambda node, ark: 2
    client = MerrittInventoryClient(inv.url, timeout=5, session_factory=_direct)
    manifest = storage_manifest_url("http://127.0.0.1:1/store", 7777, "ark:/99999/fk4a")
    first = client.add(manifest)
    again = client.add(manifest)
    assert first["invp:operation"] == again["invp:operation"] == "add"
    assert len(inv.adds) == 1
    inv.fail_next = [500]
    with pytest.raises(InventoryError, match="500 Internal Server Error") as caught:
        client.add(manifest)
    assert caught.value.retryable
    with pytest.raises(InventoryError, match="INVALID_OR_MISSING_PARM") as caught:
        client.add("http://127.0.0.1:1/store/state/7777")
    assert caught.value.retryable  # inventory answers 500 to a malformed URL, as it does


def _direct():
    from tests.httpserver import direct_session

    return direct_session()
