"""``local`` mode beside Merritt's storage and inventory consumers (``harness.merrittservices``):
they never take one of our jobs, even one that waits in Storing for a storage lock or in
Recording for an inventory lock.
"""

from __future__ import annotations

import time

import pytest

from batches.models import Profile
from harness.merrittservices import InventoryReplay, StorageReplay
from harness.merrittzk import LOCK_INVENTORY, LOCK_STORAGE, MerrittZK, lock_name
from merritt_queue.core import stepowners
from merritt_queue.core import tree as t
from merritt_queue.core.states import BatchStatus, JobStatus

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

ARK = "ark:/99999/fk4localwait"


@pytest.fixture
def consumers(pipeline, make_client, settings):
    settings.MQ_STORE_RECORD = stepowners.LOCAL
    Profile.objects.filter(pk=pipeline.profile.pk).update(
        allow_external_ids=True, external_shoulders="ark:/99999/fk4"
    )
    zk = MerrittZK(make_client())
    storage = StorageReplay(zk)
    return storage, InventoryReplay(zk, storage)


def step_until(pipeline, jid, done, consumers, timeout=30.0):
    """Our workers step; Merritt's consumers poll between every step."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = pipeline.store.jobs.get_job(jid)
        if done(job):
            return job
        pipeline.step()
        for consumer in consumers:
            consumer.poll()
        time.sleep(0.05)
    raise AssertionError(f"job {jid} never got there: {pipeline.store.jobs.get_job(jid)}")


def submitted_while_another_stores(pipeline, content, make_client):
    """A one-file job of ours for ``ARK`` while another holds its storage lock; (the other's
    client, the batch, the job)."""
    other = make_client()
    other.create(f"{LOCK_STORAGE}/{lock_name(ARK)}", b"jid9999999999", makepath=True)
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg", primary_id=ARK)
    pipeline.step()
    (jid,) = [j.jid for j in pipeline.jobs(bid)]
    return other, bid, jid


def test_a_local_job_waiting_for_its_storage_or_inventory_lock_is_never_merritts(
    pipeline, content, consumers, make_client
):
    storage, inventory = consumers
    other, bid, jid = submitted_while_another_stores(pipeline, content, make_client)

    def waits_in(status, why):
        return lambda job: job.status == status and why in job.message

    step_until(pipeline, jid, waits_in(JobStatus.STORING, "being stored"), consumers)
    for _ in range(5):  # it waits unlocked today: storage's consumer takes and fails it
        assert storage.poll() is None
    assert lock_held_by_someone(pipeline, jid)
    # Kept from Merritt's consumers, yet not held by a worker: it can still be steered.
    assert not pipeline.store.jobs.get_job(jid).locked
    other.create(f"{LOCK_INVENTORY}/{lock_name(ARK)}", ephemeral=True, makepath=True)
    other.delete(f"{LOCK_STORAGE}/{lock_name(ARK)}")
    step_until(pipeline, jid, waits_in(JobStatus.RECORDING, "being recorded"), consumers)
    for _ in range(5):
        assert inventory.poll() is None
    other.delete(f"{LOCK_INVENTORY}/{lock_name(ARK)}")
    step_until(pipeline, jid, lambda j: j.status == JobStatus.COMPLETED, consumers)
    assert storage.taken == [] and inventory.taken == []
    assert pipeline.store.batches.get_batch(bid).status in (
        BatchStatus.PROCESSING,
        BatchStatus.COMPLETED,
    )
    assert not pipeline.store.client.exists(t.job_node(jid, "lock"))


def lock_held_by_someone(pipeline, jid) -> bool:
    return pipeline.store.client.exists(t.job_node(jid, "lock")) is not None


def test_a_local_job_resumed_into_storing_is_parked_before_anyone_can_take_it(
    pipeline, content, consumers, make_client
):
    storage, inventory = consumers
    other, bid, jid = submitted_while_another_stores(pipeline, content, make_client)
    step_until(pipeline, jid, lambda j: j.status == JobStatus.STORING, consumers)
    pipeline.store.moves.force_fail(jid, "an operator stopped it")
    assert not lock_held_by_someone(pipeline, jid)
    assert not other.exists(f"{LOCK_STORAGE}/{lock_name(ARK)}")  # force_fail took it too
    resumed = pipeline.store.edits.resume_job(jid)
    assert resumed.status == JobStatus.STORING
    assert lock_held_by_someone(pipeline, jid) and not pipeline.store.jobs.get_job(jid).locked
    assert storage.poll() is None
    step_until(pipeline, jid, lambda j: j.status == JobStatus.COMPLETED, consumers)
    assert storage.taken == [] and inventory.taken == []
