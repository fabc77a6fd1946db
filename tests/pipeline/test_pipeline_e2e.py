"""Submitted content flows through every state on real ZooKeeper, Redis, RQ workers and HTTP.

Every submission type ends with every job Completed, each object in storage with the
depositor's bytes (md5 of the fixture files), inventory rows, a status report listing every
job as successful, and an e-mail to the profile's address.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile

from django.core import mail

from door.submission import Upload, submit
from inventory.models import InventoryFile, InventoryObject, InventoryVersion
from merritt_queue.services.storage import LocalStorage, escape_ark
from tests.pipelinerun import FIXTURES

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


def md5(name: str) -> str:
    return hashlib.md5((FIXTURES / name).read_bytes()).hexdigest()


def archive_md5s(name: str) -> dict[str, str]:
    """md5 of every file inside a fixture zip or tar.gz, by its name in the archive."""
    path = FIXTURES / name
    if name.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            return {
                i.filename: hashlib.md5(z.read(i)).hexdigest()
                for i in z.infolist()
                if not i.is_dir()
            }
    with tarfile.open(path) as tar:
        return {
            m.name: hashlib.md5(tar.extractfile(m).read()).hexdigest()
            for m in tar.getmembers()
            if m.isfile()
        }


def stored_text(pipeline, ark: str, name: str) -> str:
    """A file of the newest stored version, read back from local storage."""
    storage = LocalStorage(pipeline.root / "storage")
    version = storage.versions(ark)[-1]
    path = pipeline.root / "storage" / escape_ark(ark) / f"v{version}" / name
    return path.read_text(encoding="utf-8")


def assert_stored(pipeline, job, names: list[str] | dict[str, str]) -> None:
    """The job's object is in storage and inventory with the depositor's bytes.

    ``names`` are fixture files (md5 computed from them), or a mapping name -> md5.
    """
    expected = names if isinstance(names, dict) else {n: md5(n) for n in names}
    ark = job.identifiers["primary_id"]
    assert ark.startswith("ark:/99999/fk4")
    storage = LocalStorage(pipeline.root / "storage")
    assert storage.versions(ark) == [1]
    version = storage.get_version(ark, 1)
    stored = {f.name: f for f in version.files}
    assert version.token == job.jid
    for name, digest in expected.items():
        assert stored[f"producer/{name}"].digests["md5"] == digest, name
    producer = {n for n in stored if n.startswith("producer/")}
    assert producer == {f"producer/{n}" for n in expected}
    assert {"system/mrt-erc.txt", "system/mrt-dc.xml"} <= set(stored)
    row = InventoryObject.objects.get(ark=ark)
    (inv,) = InventoryVersion.objects.filter(obj=row)
    assert inv.number == 1 and inv.job_id == job.jid
    files = dict(InventoryFile.objects.filter(version=inv).values_list("name", "md5"))
    for name, digest in expected.items():
        assert files[f"producer/{name}"] == digest, name


def assert_batch_completed(pipeline, bid: str, count: int) -> list:
    """The batch is Completed with ``count`` Completed jobs, reported and mailed; the jobs."""
    batch = pipeline.store.batches.get_batch(bid)
    assert batch.status == "Completed", batch.message
    assert batch.message == f"{count} completed, 0 failed, 0 deleted"
    jobs = pipeline.jobs(bid)
    assert len(jobs) == count
    for job in jobs:
        assert job.status == "Completed", (job.jid, job.message)
        assert job.last_successful_status == "Notify"
        assert not job.locked
    report = batch.status_report
    assert sorted(report["successful_jobs"]) == sorted(j.jid for j in jobs)
    assert report["failed_jobs"] == []
    (message,) = [m for m in mail.outbox if bid in m.subject]
    assert message.to == ["depositor@example.org"]
    assert message.subject == f"Batch {bid}: {count} completed, 0 failed, 0 deleted"
    for job in jobs:
        assert job.jid in message.body and job.identifiers["primary_id"] in message.body
    # Distinct objects: no ARK minted twice.
    assert len({j.identifiers["primary_id"] for j in jobs}) == count
    return jobs


def by_filename(jobs) -> dict:
    return {j.configuration["filename"]: j for j in jobs}


def submit_call911(pipeline, content, **extra) -> str:
    """Merritt's one-file sample deposit, with its digest and title."""
    return pipeline.submit(
        type="file",
        payload_url=f"{content.url}/call911.jpg",
        digest_type="md5",
        digest_value=md5("call911.jpg"),
        erc_what="If This Bell Rings Call 911",
        **extra,
    )


def test_a_single_file_is_stored_inventoried_and_reported(pipeline, content):
    bid = submit_call911(pipeline, content, batchID="single-file")
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    (job,) = assert_batch_completed(pipeline, bid, 1)
    assert_stored(pipeline, job, ["call911.jpg"])
    assert "what: If This Bell Rings Call 911" in stored_text(
        pipeline, job.identifiers["primary_id"], "system/mrt-erc.txt"
    )


def test_an_object_manifest_becomes_one_object_with_all_its_files(pipeline, content):
    bid = pipeline.submit(type="object-manifest", payload_url=f"{content.url}/4blocks.checkm")
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    (job,) = assert_batch_completed(pipeline, bid, 1)
    assert_stored(pipeline, job, ["4blocks.jpg", "4blocks.txt"])


def test_a_batch_of_files_makes_one_object_per_row_with_its_row_metadata(pipeline, content):
    bid = pipeline.submit(
        type="single-file-batch-manifest",
        payload_url=f"{content.url}/sampleBatchOfFiles.checkm",
    )
    pipeline.run(bid)
    jobs = by_filename(assert_batch_completed(pipeline, bid, 3))
    assert set(jobs) == {"goldenDragon.jpg", "tumbleBug.jpg", "generalDrapery.jpg"}
    expected_meta = {
        "goldenDragon.jpg": {
            "erc_who": "Tracy Seneca",
            "erc_what": "Golden Dragon Restaurant Sign",
            "erc_when": "2009-09-01",
        },
        "tumbleBug.jpg": {"erc_who": "Tracy Seneca", "erc_what": "Tumble Bug, Luna Park.  Sydney"},
        "generalDrapery.jpg": {"erc_what": "General Drapery"},
    }
    for name, job in jobs.items():
        assert job.metadata == expected_meta[name]
        assert_stored(pipeline, job, [name])
        ark = job.identifiers["primary_id"]
        erc = stored_text(pipeline, ark, "system/mrt-erc.txt")
        meta = expected_meta[name]
        assert f"who: {meta.get('erc_who', '(:unav)')}\n" in erc
        assert f"what: {meta['erc_what']}\n" in erc
        assert f"when: {meta.get('erc_when', '(:unav)')}\n" in erc
        assert f"where: {ark}\n" in erc
        row = InventoryObject.objects.get(ark=ark)
        assert (row.title, row.creator, row.date) == (
            meta["erc_what"],
            meta.get("erc_who", ""),
            meta.get("erc_when", ""),
        )


def test_a_batch_of_manifests_makes_one_object_per_object_manifest(pipeline, content):
    bid = pipeline.submit(
        type="batch-manifest", payload_url=f"{content.url}/sampleBatchOfManifests.checkm"
    )
    pipeline.run(bid)
    jobs = by_filename(assert_batch_completed(pipeline, bid, 3))
    assert set(jobs) == {"bigHunt.checkm", "4blocks.checkm", "call911.checkm"}
    assert all(j.configuration["payload_type"] == "object-manifest" for j in jobs.values())
    assert_stored(pipeline, jobs["bigHunt.checkm"], ["bigHunt2.jpg", "bigHunt3.jpg", "bigHunt.txt"])
    assert_stored(pipeline, jobs["4blocks.checkm"], ["4blocks.jpg", "4blocks.txt"])
    assert_stored(pipeline, jobs["call911.checkm"], ["call911.jpg", "call911.txt"])
    assert jobs["4blocks.checkm"].metadata == {
        "erc_who": "Tracy Seneca",
        "erc_what": "Motel Capri - manifest style",
        "erc_when": "2009-09-01T00:00:00",
    }


def test_a_batch_of_containers_unpacks_each_container_into_its_object(pipeline, content):
    bid = pipeline.submit(
        type="container-batch-manifest",
        payload_url=f"{content.url}/sampleBatchOfContainers.checkm",
    )
    pipeline.run(bid)
    jobs = by_filename(assert_batch_completed(pipeline, bid, 3))
    assert set(jobs) == {"huskyChicken.zip", "outdoorStore.zip", "souvenirs.zip"}
    for name, job in jobs.items():
        assert_stored(pipeline, job, archive_md5s(name))
    assert jobs["huskyChicken.zip"].metadata["erc_what"] == "Husky Chicken"


def test_a_single_zip_container_is_unpacked_into_one_object(pipeline, content):
    bid = pipeline.submit(type="container", payload_url=f"{content.url}/huskyChicken.zip")
    pipeline.run(bid)
    (job,) = assert_batch_completed(pipeline, bid, 1)
    assert_stored(pipeline, job, archive_md5s("huskyChicken.zip"))


def test_a_tar_gz_container_is_unpacked_into_one_object(pipeline, content):
    bid = pipeline.submit(
        type="container",
        payload_url=f"{content.url}/brain_v1.tar.gz",
        digest_type="md5",
        digest_value=md5("brain_v1.tar.gz"),
    )
    pipeline.run(bid)
    (job,) = assert_batch_completed(pipeline, bid, 1)
    assert_stored(pipeline, job, archive_md5s("brain_v1.tar.gz"))


def test_the_same_batch_id_twice_returns_the_first_batch_and_creates_nothing(pipeline, content):
    data = {
        "profile": "demo",
        "submitter": "tester",
        "type": "file",
        "payload_url": f"{content.url}/call911.jpg",
        "batchID": "twice-1",
    }
    first = submit(data)
    again = submit(data | {"erc_what": "a different title"})
    assert not first.duplicate
    assert again.duplicate and again.bid == first.bid and again.batch_uuid == "twice-1"
    assert pipeline.store.batches.list_batch_ids() == [first.bid]
    pipeline.run(first.bid)
    (job,) = assert_batch_completed(pipeline, first.bid, 1)
    assert "erc_what" not in (job.metadata or {})
    # After the batch ran, the same batchID is still the same batch: nothing is ingested twice.
    third = submit(data)
    assert third.duplicate and third.bid == first.bid
    assert pipeline.store.batches.list_batch_ids() == [first.bid]
    assert pipeline.store.jobs.list_job_ids() == [job.jid]


def test_an_uploaded_file_is_ingested_from_the_queue_upload_area(pipeline):
    payload = (FIXTURES / "tumbleBug.jpg").read_bytes()
    result = submit(
        {
            "profile": "demo",
            "submitter": "tester",
            "type": "file",
            "erc_what": "Tumble Bug (uploaded)",
            "digest_type": "md5",
            "digest_value": md5("tumbleBug.jpg"),
        },
        Upload("tumble bug.jpg", io.BytesIO(payload), len(payload)),
    )
    batch = pipeline.store.batches.get_batch(result.bid)
    assert batch.submission["payload_url"].startswith("file:")
    assert batch.submission["filename"] == "tumble_bug.jpg"
    pipeline.run(result.bid)
    (job,) = assert_batch_completed(pipeline, result.bid, 1)
    assert_stored(pipeline, job, {"tumble_bug.jpg": md5("tumbleBug.jpg")})
