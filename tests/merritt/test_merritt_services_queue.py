"""``merritt-queue``: Merritt's storage and inventory consumers (``harness.merrittservices``)
store and record our jobs through the queue, beside our dispatcher and workers on one
ZooKeeper; their content comes from our web tier at signed URLs.
"""

from __future__ import annotations

import io
import time
import zipfile
from urllib.parse import urlsplit

import pytest
import requests

from batches.models import Profile
from harness.merrittservices import InventoryReplay, StorageReplay
from harness.merrittstore import MerrittStore
from harness.merrittzk import MerrittZK
from merritt_queue.core import stepowners
from merritt_queue.core.states import BatchStatus, JobStatus
from pipeline import services

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

NODE = 9501
FINAL = {BatchStatus.COMPLETED, BatchStatus.FAILED, BatchStatus.DELETED}


@pytest.fixture
def merritt(pipeline, make_client, live_server, http_server, settings):
    """Merritt's storage and inventory consumers; storage's ``/state/`` answered over HTTP,
    where our workers read what it stored."""
    state = MerrittStore(http_server, node=str(NODE))
    settings.MQ_CONTENT_BASE_URL = live_server.url
    settings.MERRITT_STORAGE_URL = state.url
    settings.MERRITT_STORAGE_RETRY_SECONDS = 0.2
    Profile.objects.filter(pk=pipeline.profile.pk).update(
        storage_node=str(NODE), store_record=stepowners.MERRITT_QUEUE
    )
    services.reset()
    zk = MerrittZK(make_client())
    storage = StorageReplay(zk, nodes=(NODE,), state=state)
    return storage, InventoryReplay(zk, storage)


def run(pipeline, merritt, bid: str, timeout: float = 90):
    """Our workers and Merritt's consumers take turns until the batch is final."""
    storage, inventory = merritt
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = pipeline.store.batches.get_batch(bid)
        if batch.status in FINAL:
            return batch
        busy = pipeline.step()
        while storage.poll() is not None:
            busy += 1
        while inventory.poll() is not None:
            busy += 1
        if not busy:
            time.sleep(0.05)
    raise AssertionError(f"batch {bid} did not finish: {pipeline.store.batches.get_batch(bid)}")


def completed(pipeline, merritt, bid: str, count: int) -> list:
    batch = run(pipeline, merritt, bid)
    jobs = pipeline.jobs(bid)
    assert [(j.status, j.message) for j in jobs if j.status != JobStatus.COMPLETED] == []
    assert batch.status == BatchStatus.COMPLETED and len(jobs) == count
    return jobs


def handed_over(pipeline, content):
    """A one-file job our workers alone have carried to Storing: left for Merritt's storage."""
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    for _ in range(40):
        pipeline.step()
        if pipeline.jobs(bid)[0].status == JobStatus.STORING:
            break
    (job,) = pipeline.jobs(bid)
    return job


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for member, data in files.items():
            z.writestr(member, data)
    return buffer.getvalue()


SUBMISSIONS = [
    ("file", "call911.jpg", 1),
    ("container", "huskyChicken.zip", 1),
    ("object-manifest", "4blocks.checkm", 1),
    ("single-file-batch-manifest", "sampleBatchOfFiles.checkm", None),
    ("batch-manifest", "sampleBatchOfManifests.checkm", None),
    ("container-batch-manifest", "sampleBatchOfContainers.checkm", None),
]


@pytest.mark.parametrize(("kind", "name", "count"), SUBMISSIONS)
def test_every_submission_type_is_stored_and_recorded_by_merritts_consumers(
    pipeline, content, merritt, kind, name, count
):
    storage, inventory = merritt
    bid = pipeline.submit(type=kind, payload_url=f"{content.url}/{name}")
    batch = run(pipeline, merritt, bid)
    jobs = pipeline.jobs(bid)
    assert [(j.jid, j.message) for j in jobs if j.status != JobStatus.COMPLETED] == []
    assert batch.status == BatchStatus.COMPLETED
    if count is not None:
        assert len(jobs) == count
    arks = [j.identifiers["primary_id"] for j in jobs]
    # Each version stored once, by Merritt's storage, and recorded by its inventory.
    assert sorted(storage.taken) == sorted(j.jid for j in jobs)
    assert sorted(inventory.taken) == sorted(j.jid for j in jobs)
    assert all(len(storage.objects[ark].versions) == 1 for ark in arks)
    assert sorted(inventory.recorded) == sorted((ark, 1) for ark in arks)
    assert sorted(inventory.lock_keys) == sorted(arks)  # one lock key per object
    for job in jobs:
        store = job.store
        action, node, ark = store["mode"].split("/")
        assert (action, node) == ("add", str(NODE)) and store["delete"] == ""
        assert job.inventory["manifest_url"].startswith(f"{storage.base_url}/manifest/{NODE}/")
        assert urlsplit(store["manifest_url"]).scheme == "http"
    # Storage fetched only over HTTP from our web tier, never a file: URL.
    assert storage.fetched and all(u.startswith(content_base(pipeline)) for u in storage.fetched)


def content_base(pipeline) -> str:
    from django.conf import settings

    return settings.MQ_CONTENT_BASE_URL


def test_an_update_with_a_delete_list_is_stored_by_merritt_as_a_second_version(
    pipeline, http_server, merritt
):
    storage, inventory = merritt
    (http_server.root / "v1.zip").write_bytes(zip_bytes({"a.txt": b"a\n", "b.txt": b"b\n"}))
    bid = pipeline.submit(type="container", payload_url=f"{http_server.url}/v1.zip")
    (v1,) = completed(pipeline, merritt, bid, 1)
    ark = v1.identifiers["primary_id"]
    v2_zip = zip_bytes({"c.txt": b"c\n", "mrt-delete.txt": b"a.txt\n"})
    (http_server.root / "v2.zip").write_bytes(v2_zip)
    bid = pipeline.submit(
        type="container",
        payload_url=f"{http_server.url}/v2.zip",
        submission_mode="update",
        primary_id=ark,
    )
    (v2,) = completed(pipeline, merritt, bid, 1)
    assert v2.identifiers["primary_id"] == ark
    assert v2.store["mode"].startswith(f"update/{NODE}/") and v2.store["delete"] == (
        "producer/a.txt\n"
    )
    versions = storage.objects[ark].versions
    assert len(versions) == 2
    assert {"producer/b.txt", "producer/c.txt", "system/mrt-delete.txt"} <= versions[1].keys()
    assert "producer/a.txt" not in versions[1]
    assert inventory.recorded == [(ark, 1), (ark, 2)]


def test_the_served_manifest_opens_only_through_its_own_signed_url(pipeline, content, merritt):
    storage, inventory = merritt
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    other = pipeline.submit(type="file", payload_url=f"{content.url}/call911.txt")
    # Our workers alone: both jobs wait in Storing for Merritt's storage.
    for _ in range(40):
        pipeline.step()
        jobs = pipeline.jobs(bid) + pipeline.jobs(other)
        if all(j.status == JobStatus.STORING for j in jobs):
            break
    (job,), (second,) = pipeline.jobs(bid), pipeline.jobs(other)
    assert job.status == second.status == JobStatus.STORING
    assert not job.locked  # left for storage's consumer
    url = job.store["manifest_url"]
    assert requests.get(url, timeout=10).status_code == 200
    path, signature = url.split("?s=")
    refused = [
        path,  # unsigned
        f"{path}?s=",
        f"{path}?s={signature[:-2]}xx",  # tampered
        path.replace(job.jid, second.jid) + f"?s={signature}",  # another job's signature
        f"{path.rsplit('/', 1)[0]}/producer/call911.jpg?s={signature}",  # another file
    ]
    assert [requests.get(u, timeout=10).status_code for u in refused] == [404] * len(refused)
    from django.test import override_settings

    with override_settings(MQ_CONTENT_URL_MAX_AGE=-1):  # expired
        assert requests.get(url, timeout=10).status_code == 404
    # Once recorded (Notify or later), nothing is served any more.
    completed(pipeline, merritt, bid, 1)
    assert requests.get(url, timeout=10).status_code == 404


def test_our_workers_never_take_a_merritt_queue_job_in_storing_or_recording(
    pipeline, content, merritt
):
    storage, inventory = merritt
    bid = handed_over(pipeline, content).bid
    for _ in range(3):
        pipeline.step()
    (job,) = pipeline.jobs(bid)
    assert job.status == JobStatus.STORING and not job.locked
    assert storage.poll() is not None
    for _ in range(3):
        pipeline.step()
    (job,) = pipeline.jobs(bid)
    assert job.status == JobStatus.RECORDING and not job.locked
    assert inventory.poll() is not None
    completed(pipeline, merritt, bid, 1)


def test_the_job_list_says_which_merritt_service_has_a_job(
    pipeline, content, merritt, client, django_user_model
):
    """Before, only the job page said so: the list showed "Storing" and a reader wondered why
    no worker of ours had it."""
    from mirror import facade as mirror

    job = handed_over(pipeline, content)
    client.force_login(django_user_model.objects.create_user("ada", is_superuser=True))
    mirror.apply_job(job)
    listed = client.get("/jobs/").content.decode()
    row = next(r for r in listed.split("<tr") if job.jid in r)
    assert "Merritt storage has it" in row, row


def test_a_job_storage_fails_with_null_says_which_service_step_input_and_what_to_check(
    pipeline, content, merritt, settings, client, django_user_model
):
    from mirror import facade as mirror

    storage, inventory = merritt
    job = handed_over(pipeline, content)
    client.force_login(django_user_model.objects.create_user("ada", is_superuser=True))
    mirror.apply_job(job)
    page = client.get(f"/jobs/{job.jid}/").content.decode()
    assert "<strong>Merritt storage</strong> has had it since" in page
    # Storage cannot reach us: it fetches nothing and says "null".
    settings.MQ_CONTENT_BASE_URL = "http://127.0.0.1:9"
    storage._get = lambda url: (_ for _ in ()).throw(ConnectionError(url))
    assert storage.poll() is not None
    (job,) = pipeline.jobs(job.bid)
    assert job.status == JobStatus.FAILED and job.message.endswith("Store action failed: null")
    mirror.apply_job(job)
    page = client.get(f"/jobs/{job.jid}/").content.decode()
    assert "<strong>Merritt storage</strong> failed this job in <strong>Storing</strong>" in page
    unsigned = job.store["manifest_url"].split("?")[0]
    assert f"<code>{unsigned}</code>" in page and "?s=" not in page
    assert f"<code>add/{NODE}/" in page and "Merritt storage can reach http://127.0.0.1:9" in page
    assert f"storage node {NODE} exists" in page


def test_the_live_view_of_a_handed_over_job_shows_no_signature(
    pipeline, content, merritt, client, django_user_model
):
    """Whoever reads a job's page must not get a URL that opens its files."""
    from mirror import facade as mirror

    job = handed_over(pipeline, content)
    assert "?s=" in job.store["manifest_url"]
    client.force_login(django_user_model.objects.create_user("vic", is_superuser=True))
    mirror.apply_job(job)
    page = client.get(f"/jobs/{job.jid}/?live=1").content.decode()
    assert "The mirror matches ZooKeeper" in page
    assert job.store["manifest_url"].split("?")[0] in page and "?s=" not in page


def test_the_admin_shows_a_handed_over_jobs_store_node_without_its_signature(
    pipeline, content, merritt, client, django_user_model
):
    from mirror import facade as mirror

    job = handed_over(pipeline, content)
    mirror.apply_job(job)
    client.force_login(
        django_user_model.objects.create_user("sam", is_staff=True, is_superuser=True)
    )
    from jobs.models import Job

    pk = Job.objects.get(jid=job.jid).pk
    response = client.get(f"/admin/jobs/job/{pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert job.store["manifest_url"].split("?")[0] in page and "?s=" not in page
