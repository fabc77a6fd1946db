"""Submitted content flows through every state on real ZooKeeper, Redis, RQ workers and HTTP."""

from __future__ import annotations

import hashlib

from django.core import mail

from inventory.models import InventoryFile, InventoryObject
from merritt_queue.services.storage import LocalStorage
from tests.pipeline import FIXTURES

pytest_plugins = ["tests.httpserver", "tests.pipeline"]


def md5(name: str) -> str:
    return hashlib.md5((FIXTURES / name).read_bytes()).hexdigest()


def assert_stored(pipeline, job, names: list[str]) -> None:
    """The job's object is in storage and inventory with the depositor's bytes."""
    ark = job.identifiers["primary_id"]
    assert ark.startswith("ark:/99999/fk4")
    storage = LocalStorage(pipeline.root / "storage")
    version = storage.get_version(ark, storage.versions(ark)[-1])
    stored = {f.name: f for f in version.files}
    for name in names:
        assert stored[f"producer/{name}"].digests["md5"] == md5(name)
    assert "system/mrt-erc.txt" in stored
    row = InventoryObject.objects.get(ark=ark)
    assert set(InventoryFile.objects.filter(version__obj=row).values_list("name", flat=True)) >= {
        f"producer/{n}" for n in names
    }


def test_a_single_file_is_stored_inventoried_and_reported(pipeline, content):
    bid = pipeline.submit(
        type="file",
        payload_url=f"{content.url}/call911.jpg",
        digest_type="md5",
        digest_value=md5("call911.jpg"),
        erc_what="If This Bell Rings Call 911",
        batchID="single-file",
    )
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    (job,) = pipeline.jobs(bid)
    assert job.status == "Completed" and job.last_successful_status == "Notify"
    assert_stored(pipeline, job, ["call911.jpg"])
    report = pipeline.store.get_batch(bid).status_report
    assert report["successful_jobs"] == [job.jid] and report["failed_jobs"] == []
    assert mail.outbox and bid in mail.outbox[-1].subject


def test_an_object_manifest_becomes_one_object_with_all_its_files(pipeline, content):
    bid = pipeline.submit(type="object-manifest", payload_url=f"{content.url}/4blocks.checkm")
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    (job,) = pipeline.jobs(bid)
    assert_stored(pipeline, job, ["4blocks.jpg", "4blocks.txt"])
