"""Destructive updates wait for a person: through the real pipeline, an update that deletes
files or replaces most of an object's bytes stops Held after Processing with its diff, and
goes on to Storing (approved) or fails (rejected) without Processing again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from merritt_queue.core import review
from merritt_queue.core.errors import ChangedUnderYou, InvalidTransition
from pipeline.review import hold
from steering.actions import reviews
from tests.pipeline.test_objects_pipeline import run_one, serve_zip, storage

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


def first_version(pipeline, http_server, local_id: str, files: dict[str, bytes]) -> str:
    v1 = run_one(
        pipeline,
        type="container",
        payload_url=serve_zip(http_server, f"{local_id}-v1.zip", files),
        local_id=local_id,
    )
    return v1.identifiers["primary_id"]


def submit_update(pipeline, http_server, local_id: str, files: dict[str, bytes]):
    """Submit an update and run it until its job stops (Held, or the batch is final)."""
    bid = pipeline.submit(
        type="container",
        payload_url=serve_zip(http_server, f"{local_id}-v2.zip", files),
        local_id=local_id,
        submission_mode="update",
    )

    def stopped(batch):
        jobs = pipeline.jobs(bid)
        return batch.status in ("Completed", "Failed") or (jobs and jobs[0].status == "Held")

    pipeline.run(bid, until=stopped)
    (job,) = pipeline.jobs(bid)
    return bid, job


@pytest.fixture
def reviewed(pipeline, settings):
    settings.MQ_DESTRUCTIVE_REVIEW = True
    return pipeline


def test_an_update_that_deletes_a_file_waits_held_with_its_diff(reviewed, http_server):
    ark = first_version(reviewed, http_server, "del", {"a.txt": b"a" * 10, "b.txt": b"b" * 20})
    _, job = submit_update(
        reviewed, http_server, "del", {"c.txt": b"c" * 5, "mrt-delete.txt": b"a.txt\n"}
    )
    assert job.status == "Held" and job.last_successful_status == "Processing"
    assert job.message.startswith(review.WAITING) and "deletes 1 file(s)" in job.message
    assert review.awaiting(job)
    diff = job.store[review.KEY]
    assert diff["version"] == 1
    assert diff["totals"]["deleted"] == {"files": 1, "bytes": 10}
    assert diff["totals"]["added"]["files"] == 2  # c.txt and system/mrt-delete.txt
    assert ["producer/a.txt", 10, None] in diff["files"]["deleted"]
    assert ["producer/b.txt", 20, 20] in diff["files"]["carried"]
    assert diff["files"]["left_out"] == 0
    # Merritt's storage reads the store node's own keys; they are as without a review.
    assert job.store["mode"].startswith("update/") and job.store["delete"]
    assert storage(reviewed).versions(ark) == [1]  # nothing stored yet


def test_approval_goes_straight_to_storing_and_stores_the_version(reviewed, http_server):
    ark = first_version(reviewed, http_server, "ok", {"a.txt": b"a\n", "b.txt": b"b\n"})
    bid, job = submit_update(
        reviewed, http_server, "ok", {"c.txt": b"c\n", "mrt-delete.txt": b"a.txt\n"}
    )
    after = review.approve(reviewed.store, job, "alice", "the depositor asked for it")
    assert after.status == "Storing" and after.last_successful_status == "Processing"
    with pytest.raises(ChangedUnderYou, match="awaits no review"):
        review.approve(reviewed.store, after, "bob", "again")
    batch = reviewed.run(bid)
    (done,) = reviewed.jobs(bid)
    assert batch.status == "Completed", done.message
    assert storage(reviewed).versions(ark) == [1, 2]
    statuses = [e.to_status for e in done.history.entries]
    assert statuses.count("Processing") == 1  # Processing was not run again
    assert statuses[statuses.index("Held") + 1] == "Storing"
    assert done.store[review.KEY]["decision"] == "approved"
    assert done.store[review.KEY]["by"] == "alice"


def test_rejection_fails_the_job_and_leaves_the_object_untouched(reviewed, http_server):
    ark = first_version(reviewed, http_server, "no", {"a.txt": b"a\n", "b.txt": b"b\n"})
    bid, job = submit_update(
        reviewed, http_server, "no", {"c.txt": b"c\n", "mrt-delete.txt": b"a.txt\n"}
    )
    failed = review.reject(reviewed.store, job, "alice", "a.txt must stay")
    assert failed.status == "Failed"
    assert "rejected by alice: a.txt must stay" in failed.message
    assert reviewed.run(bid).status == "Failed"
    # Resumed at Storing, the rejected update is still not stored.
    resumed = reviewed.store.moves.transition_job(failed, "Storing", "resumed", retry=True)
    assert resumed.status == "Storing"
    reviewed.run(bid, until=lambda b: reviewed.jobs(bid)[0].status == "Failed")
    (again,) = reviewed.jobs(bid)
    assert "not stored: its destructive update was rejected by alice" in again.message
    assert storage(reviewed).versions(ark) == [1]


def test_an_update_replacing_most_bytes_waits_unless_the_profile_allows_more(reviewed, http_server):
    first_version(reviewed, http_server, "big", {"big.bin": b"x" * 900, "small.txt": b"s"})
    _, job = submit_update(reviewed, http_server, "big", {"big.bin": b"y" * 900})
    assert job.status == "Held"
    assert "replaces" in job.message and "more than 50%" in job.message
    assert job.store[review.KEY]["totals"]["replaced"]["files"] >= 1

    reviewed.profile.review_replace_share = 0.99
    reviewed.profile.save()
    first_version(reviewed, http_server, "big2", {"big.bin": b"x" * 900, "small.txt": b"s"})
    _, job = submit_update(reviewed, http_server, "big2", {"big.bin": b"z" * 900})
    assert job.status == "Completed", job.message


def test_off_by_default_and_off_for_a_profile_that_says_so(pipeline, http_server, settings):
    first_version(pipeline, http_server, "free", {"a.txt": b"a\n", "b.txt": b"b\n"})
    _, job = submit_update(
        pipeline, http_server, "free", {"c.txt": b"c\n", "mrt-delete.txt": b"a.txt\n"}
    )
    assert job.status == "Completed", job.message
    settings.MQ_DESTRUCTIVE_REVIEW = True
    pipeline.profile.review_destructive = "off"
    pipeline.profile.save()
    _, job = submit_update(pipeline, http_server, "free", {"mrt-delete.txt": b"b.txt\n"})
    assert job.status == "Completed", job.message


def test_a_new_object_never_waits(reviewed, http_server):
    v1 = run_one(
        reviewed, type="container", payload_url=serve_zip(http_server, "n.zip", {"a": b"a"})
    )
    assert v1.status == "Completed" and review.KEY not in v1.store


def submit_as(pipeline, http_server, name: str, local_id: str, files: dict, mode: str):
    bid = pipeline.submit(
        type="container",
        payload_url=serve_zip(http_server, name, files),
        local_id=local_id,
        submission_mode=mode,
    )

    def stopped(batch):
        jobs = pipeline.jobs(bid)
        return batch.status in ("Completed", "Failed") or (jobs and jobs[0].status == "Held")

    pipeline.run(bid, until=stopped)
    (job,) = pipeline.jobs(bid)
    return bid, job


def test_an_approval_of_a_diff_the_object_outgrew_is_refused_and_not_stored(reviewed, http_server):
    """v1 {a, b}; job A (an add of b alone) waits, its diff deleting a; job B adds c (v2).
    Approving A would store {b}, deleting c, which nobody saw."""
    ark = first_version(reviewed, http_server, "st", {"a.txt": b"a" * 10, "b.txt": b"b" * 10})
    bid_a, a = submit_as(reviewed, http_server, "st-a.zip", "st", {"b.txt": b"b" * 10}, "add")
    assert a.status == "Held", a.message
    _, b = submit_as(reviewed, http_server, "st-b.zip", "st", {"c.txt": b"c" * 10}, "update")
    assert b.status == "Completed", b.message
    with pytest.raises(InvalidTransition, match="object changed since the review"):
        reviews.approve_update(reviewed.store, a, {}, "alice: ok")
    # Approved all the same (as before this check, or by a person racing the other job):
    # Storing compares again under the storage lock and stores nothing.
    review.approve(reviewed.store, a, "alice", "ok")
    reviewed.run(bid_a, until=lambda b: reviewed.jobs(bid_a)[0].status == "Failed")
    (failed,) = reviewed.jobs(bid_a)
    assert "not stored: the object changed since the review" in failed.message
    assert storage(reviewed).versions(ark) == [1, 2]
    # Resumed from Processing it is compared with version 2 and waits again.
    reviewed.store.edits.resume_job(failed, "Processing")
    reviewed.run(bid_a, until=lambda b: reviewed.jobs(bid_a)[0].status == "Held")
    (again,) = reviewed.jobs(bid_a)
    assert again.store[review.KEY]["version"] == 2 and review.awaiting(again)
    deleted = [r[0] for r in again.store[review.KEY]["files"]["deleted"]]
    assert sorted(deleted) == ["producer/a.txt", "producer/c.txt"]


@pytest.mark.parametrize("mode", ["merritt-queue", "merritt-api"])
def test_an_object_merritt_may_hold_but_our_inventory_does_not_waits(tmp_path, settings, mode):
    """In Merritt's modes an ARK given or bound by Merritt's own ingest may name an object
    only Merritt holds: no version here says what the update deletes, so it waits."""
    settings.MQ_DESTRUCTIVE_REVIEW = True
    s = SimpleNamespace(
        inventory=SimpleNamespace(current_version=lambda ark: None), job_dir=lambda j: tmp_path
    )
    profile = SimpleNamespace(review_destructive="", review_replace_share=None)
    job = SimpleNamespace(jid="jid1", configuration={"store_record": mode}, store=None)
    data: dict = {"store": {"mode": "add/9501/ark"}}
    held = hold(s, job, profile, "ark:/1/x", "add", [], data)
    assert held is not None and held.target == "Held"
    assert "current version unknown" in held.message
    assert data["store"][review.KEY]["version"] is None
    assert hold(s, job, profile, "ark:/1/x", "add", [], {"store": {}}, minted=True) is None
    ours = SimpleNamespace(jid="jid1", configuration={"store_record": "local"}, store=None)
    assert hold(s, ours, profile, "ark:/1/x", "add", [], {"store": {}}) is None
