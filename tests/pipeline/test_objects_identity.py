"""Issue 12, identity: a local id resolves to its object's ARK within the collection, a new
one mints, a supplied ARK that disagrees fails with both values, two jobs with one new local
id wait for each other (the local-id lock); an update's mrt-delete.txt moves to system/.

The real pipeline on real ZooKeeper, Redis and an HTTP content server.
"""

from __future__ import annotations

import pytest

from inventory.models import InventoryObject, LocalIdentifier
from merritt_queue.core.store import QueueStore
from merritt_queue.deposit.manifest import ManifestError
from pipeline.identify import _take_delete_file
from tests.objectfixtures import (
    FIXTURES,
    files_manifest,
    minted,
    object_manifest,
    only_job,
    versions,
)

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


def submit_file(pipeline, content, name: str, **fields) -> str:
    return pipeline.submit(type="file", payload_url=f"{content.url}/{name}", **fields)


def completed(pipeline, bid: str):
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Completed", (batch.message, job.message)
    return job


def message_of(pipeline, bid: str) -> str:
    """The message of the batch's one job; empty before the batch has its job."""
    jobs = pipeline.jobs(bid)
    return jobs[0].message if jobs else ""


def ark_of(job) -> str:
    return job.identifiers["primary_id"]


# --- local id -> ARK -------------------------------------------------------------------


def test_a_second_submission_with_the_same_local_id_goes_to_the_same_ark(pipeline, content):
    first = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-1"))
    second = completed(pipeline, submit_file(pipeline, content, "call911.txt", local_id="obj-1"))
    assert ark_of(second) == ark_of(first)
    assert versions(pipeline, ark_of(first)) == [1, 2]
    assert minted(pipeline) == 1
    assert LocalIdentifier.objects.get(collection="demo", local_id="obj-1").ark == ark_of(first)


def test_a_new_local_id_mints_a_new_ark(pipeline, content):
    first = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-1"))
    second = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-2"))
    assert ark_of(second) != ark_of(first)
    assert minted(pipeline) == 2
    assert versions(pipeline, ark_of(first)) == versions(pipeline, ark_of(second)) == [1]


def test_a_local_id_resolves_within_its_collection_only(pipeline, content):
    from tests.objectfixtures import other_profile

    other_profile()
    first = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-1"))
    theirs = completed(
        pipeline, submit_file(pipeline, content, "call911.txt", local_id="obj-1", profile="other")
    )
    assert ark_of(theirs) != ark_of(first)
    assert versions(pipeline, ark_of(first)) == [1]
    assert InventoryObject.objects.get(ark=ark_of(theirs)).collection == "other"


def test_a_supplied_ark_that_disagrees_with_the_local_ids_ark_fails_with_both(pipeline, content):
    one = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-1"))
    two = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-2"))
    bid = submit_file(pipeline, content, "call911.txt", local_id="obj-1", primary_id=ark_of(two))
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Failed" and job.status == "Failed"
    assert job.last_successful_status == "Downloading"
    assert ark_of(one) in job.message and ark_of(two) in job.message, job.message
    assert versions(pipeline, ark_of(one)) == versions(pipeline, ark_of(two)) == [1]
    assert minted(pipeline) == 2


def test_a_supplied_ark_that_agrees_with_the_local_id_adds_a_version(pipeline, content):
    one = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-1"))
    again = completed(
        pipeline,
        submit_file(pipeline, content, "call911.txt", local_id="obj-1", primary_id=ark_of(one)),
    )
    assert ark_of(again) == ark_of(one)
    assert versions(pipeline, ark_of(one)) == [1, 2]


def test_an_update_by_local_id_goes_to_that_object(pipeline, content):
    one = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-1"))
    update = completed(
        pipeline,
        submit_file(pipeline, content, "call911.txt", local_id="obj-1", submission_mode="update"),
    )
    assert ark_of(update) == ark_of(one)
    assert versions(pipeline, ark_of(one)) == [1, 2]
    escaped = ark_of(one).replace(":", "%3A").replace("/", "%2F")
    assert update.store["mode"] == f"update/local/{escaped}"
    assert one.store["mode"] == f"add/local/{escaped}"


def test_a_manifest_row_with_a_local_id_goes_to_that_ids_object(pipeline, content):
    one = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-1"))
    url = files_manifest(
        content, "rows.checkm", [("call911.txt", "", "obj-1"), ("4blocks.txt", "", "obj-9")]
    )
    bid = pipeline.submit(type="single-file-batch-manifest", payload_url=url)
    assert pipeline.run(bid).status == "Completed"
    arks = {j.configuration["local_id"]: ark_of(j) for j in pipeline.jobs(bid)}
    assert arks["obj-1"] == ark_of(one) and arks["obj-9"] != ark_of(one)
    assert versions(pipeline, ark_of(one)) == [1, 2]


# --- the local-id lock -----------------------------------------------------------------

WAITING = "local id same is being resolved by another job"
# Merritt's name: the local id, "_", the demo profile's owner ARK.
SAME_LOCK = "same_ark:/99999/fk4owner"


def held_elsewhere(make_client) -> QueueStore:
    """Another ZooKeeper session holding the local-id lock of demo:same, as a job on
    another worker would while it resolves the id."""
    other = QueueStore(make_client())
    assert other.locks.lock_localid(SAME_LOCK)
    return other


def test_processing_waits_while_another_session_holds_the_local_id(pipeline, content, make_client):
    other = held_elsewhere(make_client)
    bid = submit_file(pipeline, content, "call911.jpg", local_id="same")
    pipeline.run(bid, until=lambda b: WAITING in message_of(pipeline, bid))
    job = only_job(pipeline, bid)
    assert job.status == "Processing" and not job.locked
    assert minted(pipeline) == 0 and not LocalIdentifier.objects.exists()
    other.locks.unlock_localid(SAME_LOCK)
    job = completed(pipeline, bid)
    assert minted(pipeline) == 1 and versions(pipeline, ark_of(job)) == [1]


def test_processing_waits_for_merritts_own_local_id_lock(pipeline, content, make_client):
    # MerrittZK's lockObjectLocalID(localID + "_" + owner), with ":/" runs made "_".
    pipeline.profile.owner_ark = "ark:/13030/j2owner"
    pipeline.profile.save()
    merritt = make_client()
    merritt.create("/locks/localid/same_ark_13030_j2owner", ephemeral=True)
    bid = submit_file(pipeline, content, "call911.jpg", local_id="same")
    pipeline.run(bid, until=lambda b: WAITING in message_of(pipeline, bid))
    assert minted(pipeline) == 0
    merritt.delete("/locks/localid/same_ark_13030_j2owner")
    job = completed(pipeline, bid)
    assert minted(pipeline) == 1 and versions(pipeline, ark_of(job)) == [1]


def test_two_jobs_with_one_new_local_id_in_flight_end_with_one_ark(pipeline, content, make_client):
    other = held_elsewhere(make_client)
    first = submit_file(pipeline, content, "call911.jpg", local_id="same")
    second = submit_file(pipeline, content, "call911.txt", local_id="same")

    def both_waiting(_batch) -> bool:
        return all(WAITING in message_of(pipeline, b) for b in (first, second))

    pipeline.run(first, until=both_waiting)
    assert minted(pipeline) == 0
    other.locks.unlock_localid(SAME_LOCK)
    one, two = completed(pipeline, first), completed(pipeline, second)
    assert ark_of(one) == ark_of(two)
    assert minted(pipeline) == 1
    assert versions(pipeline, ark_of(one)) == [1, 2]
    assert LocalIdentifier.objects.filter(local_id="same").count() == 1


def test_two_batches_with_one_new_local_id_submitted_together_mint_once(pipeline, content):
    first = submit_file(pipeline, content, "call911.jpg", local_id="same")
    second = submit_file(pipeline, content, "call911.txt", local_id="same")
    one, two = completed(pipeline, first), completed(pipeline, second)
    assert ark_of(one) == ark_of(two) and minted(pipeline) == 1
    assert versions(pipeline, ark_of(one)) == [1, 2]


# --- mrt-delete.txt --------------------------------------------------------------------


def test_the_delete_file_moves_to_system_and_lists_producer_names(tmp_path):
    (tmp_path / "producer").mkdir()
    (tmp_path / "producer" / "mrt-delete.txt").write_text("a.txt\n\nproducer/dir/b.txt\n")
    assert _take_delete_file(tmp_path) == ["producer/a.txt", "producer/dir/b.txt"]
    assert not (tmp_path / "producer" / "mrt-delete.txt").exists()
    assert (tmp_path / "system" / "mrt-delete.txt").read_text().startswith("a.txt")
    # A re-run of the step finds it where the first run put it.
    assert _take_delete_file(tmp_path) == ["producer/a.txt", "producer/dir/b.txt"]


def test_no_delete_file_deletes_nothing(tmp_path):
    (tmp_path / "producer").mkdir()
    assert _take_delete_file(tmp_path) == []
    assert not (tmp_path / "system").exists()


def test_a_bad_delete_file_is_refused_naming_its_line_and_stays_where_it_was(tmp_path):
    (tmp_path / "producer").mkdir()
    (tmp_path / "producer" / "mrt-delete.txt").write_text("fine.txt\n../x\n")
    with pytest.raises(ManifestError) as refused:
        _take_delete_file(tmp_path)
    text = str(refused.value)
    assert "producer/mrt-delete.txt" in text and "line 2" in text, text
    assert (tmp_path / "producer" / "mrt-delete.txt").exists()
    assert not (tmp_path / "system" / "mrt-delete.txt").exists()


def with_delete_file(content, name: str, delete_text: bytes) -> str:
    return object_manifest(
        content,
        name,
        {"call911.txt": (FIXTURES / "call911.txt").read_bytes(), "mrt-delete.txt": delete_text},
    )


def stored_names(pipeline, job) -> set[str]:
    from merritt_queue.services.storage import LocalStorage

    storage = LocalStorage(pipeline.root / "storage")
    version = storage.get_version(ark_of(job), job.store["version"])
    return {f.name for f in version.files}


def test_an_update_moves_its_delete_file_to_system_and_sends_the_list(pipeline, content):
    one = completed(pipeline, submit_file(pipeline, content, "call911.jpg", local_id="obj-1"))
    url = with_delete_file(content, "update.checkm", b"call911.jpg\n")
    bid = pipeline.submit(
        type="object-manifest", payload_url=url, local_id="obj-1", submission_mode="update"
    )
    job = completed(pipeline, bid)
    assert ark_of(job) == ark_of(one)
    assert job.store["delete"] == "producer/call911.jpg\n"
    assert job.store["mode"].startswith("update/local/")
    names = stored_names(pipeline, job)
    assert "system/mrt-delete.txt" in names and "producer/mrt-delete.txt" not in names


def test_an_add_keeps_a_delete_file_as_content(pipeline, content):
    url = with_delete_file(content, "add.checkm", b"call911.jpg\n")
    job = completed(pipeline, pipeline.submit(type="object-manifest", payload_url=url))
    assert job.store["delete"] == "" and job.store["mode"].startswith("add/local/")
    names = stored_names(pipeline, job)
    assert "producer/mrt-delete.txt" in names and "system/mrt-delete.txt" not in names


def test_an_update_with_a_bad_delete_file_fails_naming_the_line(pipeline, content):
    url = with_delete_file(content, "bad.checkm", b"../x\n")
    bid = pipeline.submit(
        type="object-manifest", payload_url=url, local_id="obj-1", submission_mode="update"
    )
    batch = pipeline.run(bid)
    job = only_job(pipeline, bid)
    assert batch.status == "Failed" and job.last_successful_status == "Downloading"
    assert "mrt-delete.txt line 1" in job.message, job.message
    assert job.store is None and minted(pipeline) == 0
    assert not LocalIdentifier.objects.exists()


def test_an_update_of_an_object_not_yet_stored_becomes_its_first_version(pipeline, content):
    job = completed(
        pipeline,
        submit_file(pipeline, content, "call911.jpg", local_id="new", submission_mode="update"),
    )
    assert versions(pipeline, ark_of(job)) == [1]
