"""A job awaiting review of its destructive update, as Merritt's own code meets it
(``harness.merrittzk`` replays MerrittZK's ``Job.load`` and ``acquireJob``): it still loads,
no Merritt consumer takes it while it waits, and once approved Merritt's storage takes a
``merritt-queue`` job with the store node it expects, while it leaves one of ours alone."""

from __future__ import annotations

import json
import uuid

import pytest

from harness.merrittzk import Item, MerrittZK
from merritt_queue.core import review
from merritt_queue.core.errors import InvalidTransition
from merritt_queue.core.records import evolve
from merritt_queue.core.treecheck.consistency import check_tree
from steering.actions import catalog, reviews
from steering.actions.resumesteps import resume_offer

STORE = {"manifest_url": "http://content/m", "mode": "update/9501/ark%3A%2F1%2Fa", "delete": ""}


def awaiting(store, mode: str) -> str:
    bid = store.new_batches.create_batch({"batchID": uuid.uuid4().hex, "collection": "demo"}).id
    config = {
        "collection": "demo",
        "payload_url": "http://content/x.zip",
        "payload_type": "container",
        "store_record": mode,
    }
    jid = store.new_jobs.create_job(bid, config)
    for step in ("Estimating", "Provisioning", "Downloading", "Processing"):
        store.moves.transition_job(jid, step)
    data = {"store": STORE | {review.KEY: {"totals": {}, "why": ["it deletes 1 file(s)"]}}}
    store.moves.transition_job(jid, "Held", f"{review.WAITING}: x", data=data)
    return jid


def test_merritt_loads_a_waiting_job_and_takes_no_step_of_it(store, make_client):
    jid = awaiting(store, "merritt-queue")
    merritt = MerrittZK(make_client())
    job = merritt.load(Item("job", jid))
    assert job.status == "Held"
    for state in ("Pending", "Estimating", "Processing", "Storing", "Recording"):
        assert merritt.acquire_job(state) is None


def test_approved_merritt_storage_takes_it_with_the_store_node_it_reads(store, make_client):
    jid = awaiting(store, "merritt-queue")
    review.approve(store, store.jobs.get_job(jid), "ada", "fine")
    merritt = MerrittZK(make_client())
    taken = merritt.acquire_job("Storing")
    assert taken is not None and taken.id == jid
    node = store.jobs.get_job(jid).store
    assert {k: node[k] for k in STORE} == STORE  # storeManifestUrl, storeMode, storeDelete


def test_approved_job_of_ours_stays_parked_from_merritt_storage(store, make_client):
    jid = awaiting(store, "local")
    review.approve(store, store.jobs.get_job(jid), "ada", "fine")
    assert store.jobs.get_job(jid).status == "Storing"
    assert MerrittZK(make_client()).acquire_job("Storing") is None


def test_a_merritt_admin_may_still_release_or_delete_it(store, make_client):
    """MerrittZK's own moves from Held (Pending, Deleted) stay open to Merritt's admin."""
    jid = awaiting(store, "merritt-queue")
    merritt = MerrittZK(make_client())
    job = merritt.load(Item("job", jid))
    merritt.set_status(job, "Deleted", "removed by Merritt's admin")
    assert store.jobs.get_job(jid).status == "Deleted"


def test_the_consistency_check_finds_nothing_amiss_in_a_waiting_or_approved_job(store):
    waiting = awaiting(store, "merritt-queue")
    approved = awaiting(store, "local")
    review.approve(store, store.jobs.get_job(approved), "ada", "fine")
    rejected = awaiting(store, "merritt-queue")
    review.reject(store, store.jobs.get_job(rejected), "ada", "no")
    found = check_tree(store, grace=0)
    ours = (waiting, approved, rejected)
    assert [f for f in found if any(j in f.path for j in ours)] == []


# mrt-admin-sinatra's requeue_ingest_job: the step after the job's last_successful_status.
MERRITT_REQUEUE = {
    "Pending": "Estimating",
    "Estimating": "Provisioning",
    "Provisioning": "Downloading",
    "Downloading": "Processing",
    "Processing": "Storing",
    "Storing": "Recording",
    "Recording": "Notify",
}


def test_a_rejected_update_resumes_at_processing_here_and_in_merritts_requeue(store, make_client):
    """Resumed at Storing, Merritt's storage would store the update the reviewer rejected."""
    jid = awaiting(store, "merritt-queue")
    failed = review.reject(store, store.jobs.get_job(jid), "ada", "keep the files")
    assert store.edits.resume_step(failed) == "Processing"
    merritt = MerrittZK(make_client())
    job = merritt.load(Item("job", jid))
    last = merritt._json(f"{job.path}/status")["last_successful_status"]
    merritt.set_status_with_retry(job, MERRITT_REQUEUE[last])
    assert store.jobs.get_job(jid).status == "Processing"
    assert merritt.acquire_job("Storing") is None


def test_a_job_failed_unapproved_is_refused_at_storing(store):
    """A job failed while it waited, or rejected before rejections moved it back (its last
    successful status still Processing), never resumes past Processing."""
    jid = awaiting(store, "merritt-queue")
    job = store.jobs.get_job(jid)
    failed = store.moves.transition_job(job, "Failed", "failed by hand")
    legacy = evolve(failed, last_successful_status="Processing")
    assert store.edits.resume_step(legacy) == "Processing"
    with pytest.raises(InvalidTransition, match="never approved"):
        store.edits.resume_step(legacy, "Storing")
    with pytest.raises(InvalidTransition, match="Processing"):
        store.edits.edit_job_parameters(legacy, {"erc_what": "x"}, to="Storing")
    assert "Storing" not in resume_offer(legacy)


@pytest.mark.django_db
def test_an_approval_older_than_the_content_links_is_refused(store, settings):
    """Merritt's storage fetches a ``merritt-queue`` job's files through links signed in
    Processing; approved after they lapse, Storing could only fail."""
    settings.MQ_CONTENT_URL_MAX_AGE = -1
    jid = awaiting(store, "merritt-queue")
    with pytest.raises(InvalidTransition, match="older than the content links"):
        reviews.approve_update(store, store.jobs.get_job(jid), {}, "ada: fine")
    assert store.jobs.get_job(jid).status == "Held"
    ours = awaiting(store, "local")  # our storage reads the working copy: no link lapses
    done = reviews.approve_update(store, store.jobs.get_job(ours), {}, "ada: fine")
    assert done.after.status == "Storing"


def test_a_bulk_resume_reads_the_review_of_a_job_it_would_resume_at_storing(store, make_client):
    """A bulk action reads job heads, without the store node; a job rejected before
    rejections set its last successful status back (still Processing) would resume at
    Storing."""
    jid = awaiting(store, "merritt-queue")
    review.reject(store, store.jobs.get_job(jid), "ada", "keep the files")
    zk = make_client()
    status = json.loads(zk.get(f"/jobs/{jid}/status")[0])
    zk.set(
        f"/jobs/{jid}/status",
        json.dumps(status | {"last_successful_status": "Processing"}).encode(),
    )
    head = store.jobs.job_heads([jid])[jid]
    assert head.partial and head.store is None
    assert catalog._resume(store, head, {}) == ("Processing", True)
    with pytest.raises(InvalidTransition, match="rejected by ada"):
        catalog._resume(store, head, {"step": "Storing"})
