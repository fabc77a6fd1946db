"""``merritt-queue``: once Merritt's consumers stored and recorded a job, our Notify step
records in our own inventory the version storage holds, so that our pages, our local-id
resolution and our collection checks know the object (issue 30)."""

from __future__ import annotations

import json

from batches.models import Profile
from inventory.models import InventoryFile, InventoryVersion
from merritt_queue.core.states import JobStatus
from pipeline import services
from pipeline.jobhandlers import handlers
from tests.merritt.test_merritt_services_queue import completed, merritt, zip_bytes

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

__all__ = ["merritt"]


def our_versions(ark: str) -> list[tuple[int, str]]:
    rows = InventoryVersion.objects.filter(obj__ark=ark).order_by("number")
    return list(rows.values_list("number", "job_id"))


def our_files(ark: str, number: int) -> dict[str, tuple[int, str]]:
    rows = InventoryFile.objects.filter(version__obj__ark=ark, version__number=number)
    return {f.name: (f.size, f.sha256) for f in rows}


def stored_files(storage, ark: str, number: int) -> dict[str, tuple[int, str]]:
    version = storage.objects[ark].versions[number - 1]
    return {name: (size, digest) for name, (size, _, digest) in version.items()}


def until_notify(pipeline, merritt, bid: str):
    """Our workers and Merritt's consumers until the job reaches Notify, not past it."""
    storage, inventory = merritt
    for _ in range(60):
        jobs = pipeline.jobs(bid)
        if jobs and jobs[0].status == JobStatus.NOTIFY:
            return jobs[0]
        if jobs and jobs[0].status in (JobStatus.STORING, JobStatus.RECORDING):
            storage.poll() or inventory.poll()
        else:
            pipeline.step()
    raise AssertionError(f"the job never reached Notify: {pipeline.jobs(bid)}")


def test_a_completed_job_is_in_our_inventory_with_the_version_storage_holds(
    pipeline, content, merritt, client, django_user_model
):
    storage, _ = merritt
    callback = content.behave("/callback", body=b"thanks\n")
    Profile.objects.filter(pk=pipeline.profile.pk).update(callback_url=callback)
    bid = pipeline.submit(type="container", payload_url=f"{content.url}/huskyChicken.zip")
    (job,) = completed(pipeline, merritt, bid, 1)
    ark = job.identifiers["primary_id"]
    assert our_versions(ark) == [(1, job.jid)]
    assert our_files(ark, 1) == stored_files(storage, ark, 1)
    assert job.store["version"] == 1
    calls = [json.loads(r.body) for r in content.requests_for("/callback", "POST")]
    assert [(c["ark"], c["version"]) for c in calls if "job_id" in c] == [(ark, 1)]
    client.force_login(django_user_model.objects.create_user("ann", is_superuser=True))
    assert ark in client.get("/objects/").content.decode()


def test_an_update_by_local_id_resolves_to_the_same_ark_and_becomes_version_two(
    pipeline, http_server, merritt
):
    storage, inventory = merritt
    assert pipeline.profile.owner_ark and not pipeline.profile.allow_external_ids
    (http_server.root / "v1.zip").write_bytes(zip_bytes({"a.txt": b"a\n", "b.txt": b"b\n"}))
    bid = pipeline.submit(
        type="container", payload_url=f"{http_server.url}/v1.zip", local_id="thing-1"
    )
    (v1,) = completed(pipeline, merritt, bid, 1)
    ark = v1.identifiers["primary_id"]
    (http_server.root / "v2.zip").write_bytes(zip_bytes({"b.txt": b"b2\n", "c.txt": b"c\n"}))
    bid = pipeline.submit(
        type="container",
        payload_url=f"{http_server.url}/v2.zip",
        submission_mode="update",
        local_id="thing-1",
    )
    (v2,) = completed(pipeline, merritt, bid, 1)
    assert v2.identifiers["primary_id"] == ark
    assert len(storage.objects[ark].versions) == 2 and v2.store["version"] == 2
    assert our_versions(ark) == [(1, v1.jid), (2, v2.jid)]
    assert our_files(ark, 2) == stored_files(storage, ark, 2)
    assert {"producer/a.txt", "producer/b.txt", "producer/c.txt"} <= our_files(ark, 2).keys()
    changes = dict(
        InventoryFile.objects.filter(version__obj__ark=ark, version__number=2).values_list(
            "name", "change"
        )
    )
    assert (changes["producer/a.txt"], changes["producer/b.txt"]) == ("carried", "replaced")
    assert changes["producer/c.txt"] == "added"


def test_a_notify_rerun_records_nothing_twice(pipeline, content, merritt):
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    job = until_notify(pipeline, merritt, bid)
    notify = handlers(services.get_services())[JobStatus.NOTIFY]
    # The step's commit lost twice (a worker killed after recording): it runs again.
    first, second = notify(job), notify(job)
    assert first.message == second.message and "version 1" in second.message
    completed(pipeline, merritt, bid, 1)
    ark = job.identifiers["primary_id"]
    assert our_versions(ark) == [(1, job.jid)]
    assert InventoryFile.objects.filter(version__obj__ark=ark).count() == len(
        stored_files(merritt[0], ark, 1)
    )


def test_a_job_waits_in_notify_while_storage_cannot_be_read_then_completes(
    pipeline, content, merritt
):
    storage, _ = merritt
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    job = until_notify(pipeline, merritt, bid)
    storage.state.down = True
    for _ in range(3):
        pipeline.step()
    (job,) = pipeline.jobs(bid)
    assert job.status == JobStatus.NOTIFY, job.message
    assert "Merritt storage" in job.message and "503" in job.message
    assert "again" in job.message
    ark = job.identifiers["primary_id"]
    assert our_versions(ark) == []
    storage.state.down = False
    completed(pipeline, merritt, bid, 1)
    assert our_versions(ark) == [(1, job.jid)]


def test_a_job_records_its_own_version_when_a_later_update_already_carried_its_files(
    pipeline, http_server, merritt
):
    """Storage gives no job its version number: a later update stored before this job's
    Notify holds this job's files too, and must not be taken for its version."""
    storage, _ = merritt
    (http_server.root / "v1.zip").write_bytes(zip_bytes({"a.txt": b"a\n"}))
    bid = pipeline.submit(type="container", payload_url=f"{http_server.url}/v1.zip")
    (v1,) = completed(pipeline, merritt, bid, 1)
    ark = v1.identifiers["primary_id"]
    jobs = []
    for name in ("c.txt", "d.txt"):
        (http_server.root / f"{name}.zip").write_bytes(zip_bytes({name: name.encode()}))
        bid = pipeline.submit(
            type="container",
            payload_url=f"{http_server.url}/{name}.zip",
            submission_mode="update",
            primary_id=ark,
        )
        jobs.append((bid, until_notify(pipeline, merritt, bid)))
        storage.state.down = True  # the job waits in Notify while the next is stored
    (first_bid, first), (second_bid, second) = jobs
    assert len(storage.objects[ark].versions) == 3
    storage.state.down = False
    notify = handlers(services.get_services())[JobStatus.NOTIFY]
    assert "version 2" in notify(first).message
    completed(pipeline, merritt, first_bid, 1)
    completed(pipeline, merritt, second_bid, 1)
    assert our_versions(ark) == [(1, v1.jid), (2, first.jid), (3, second.jid)]
    assert our_files(ark, 3) == stored_files(storage, ark, 3)
