"""Jobs side by side with Merritt's ingest (issue 13: resume, collection holds, local-id
locks, configuration keys), with ``harness.merrittzk`` as the other writer on its own session.

The project runs for real: the store, the steering pages and actions, the mirror, and (where
a job must run) the dispatcher and RQ workers of ``tests.pipelinerun``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import uuid

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from batches.models import Profile
from harness.merrittzk import Item, MerrittIngest, MerrittZK
from jobs.models import Job
from merritt_queue.core import tree as t
from merritt_queue.core.errors import QueueError
from merritt_queue.core.states import JOB_STEPS, JobStatus, resume_target
from merritt_queue.core.store import QueueStore
from merritt_queue.core.store.jobedits import JobEdits
from mirror import facade as mirror
from pipeline.identify import localid_lock_key
from steering.models import AdminAction, CollectionScope
from tests.pipelinerun import FIXTURES

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

PAYLOAD = re.compile(r'name="payload" value="([^"]+)"')
STEP = re.compile(r'name="step" value="([^"]+)"')
EVERY_STEP = (JobStatus.PENDING, *JOB_STEPS)


def payload_of(page) -> str:
    return PAYLOAD.search(page.content.decode()).group(1)


def merritt(make_client) -> tuple[MerrittZK, MerrittIngest]:
    zk = MerrittZK(make_client())
    return zk, MerrittIngest(zk)


def admin(django_user_model, name="ada", *groups, collections=None):
    user = django_user_model.objects.create_user(name, password="pw", is_superuser=not groups)
    for g in groups:
        user.groups.add(Group.objects.get_or_create(name=g)[0])
    if collections:
        CollectionScope.objects.create(user=user, collections=collections)
    return user


def set_last_successful(store: QueueStore, jid: str, value: str | None) -> None:
    """What another tool may have written: any text, or null."""
    path = t.job_node(jid, "status")
    record = t.decode_json(store.client.get(path)[0])
    record["last_successful_status"] = value
    store.client.set(path, t.encode_json(record))


def failed_job(store: QueueStore) -> str:
    bid = store.new_batches.create_batch({"batchID": uuid.uuid4().hex, "collection": "demo"}).id
    jid = store.new_jobs.create_job(bid, {"collection": "demo", "profile": "demo_content"})
    store.moves.transition_job(jid, JobStatus.FAILED, "broke")
    return jid


# --- 2. Resume, whatever last_successful_status says ------------------------------------

# The values that say where a job failed (Held: while Pending; Notify's next is Completed).
SAYS_HOW_FAR = (JobStatus.HELD, JobStatus.PENDING, *JOB_STEPS[:-1])
LAST_SUCCESSFUL = [None, *(s.value for s in JobStatus), "something else"]


@pytest.mark.parametrize("last", LAST_SUCCESSFUL)
def test_the_resume_page_offers_exactly_what_the_run_accepts(
    client, process_store, django_user_model, last
):
    store = process_store
    jid = failed_job(store)
    set_last_successful(store, jid, last)
    job = store.jobs.get_job(jid)
    mirror.apply_job(job)
    client.force_login(admin(django_user_model))

    page = client.get(f"/actions/job.resume/confirm?ids={jid}")
    body = page.content.decode()
    assert page.status_code == 200 and 'name="payload"' in body, body  # it applies
    offered = STEP.findall(body)
    accepted = []
    for step in EVERY_STEP:
        try:
            JobEdits.resume_step(job, step)
            accepted.append(step)
        except QueueError:
            pass
    assert offered == accepted and offered[0] == JobStatus.PENDING
    if last is None or last in SAYS_HOW_FAR:
        assert "does not say how far it got" not in body
    else:
        assert offered == [JobStatus.PENDING] and "does not say how far it got" in body

    done = client.post(
        "/actions/job.resume/execute", {"payload": payload_of(page), "reason": "try again"}
    )
    assert done.status_code == 302
    record = AdminAction.objects.get()
    assert (record.done, record.failed, record.skipped) == (1, 0, 0), record.items.all()
    resumed = store.jobs.get_job(jid)
    assert resumed.status == resume_target(last) == offered[-1] and resumed.retry_count == 1


@pytest.fixture
def demo_file(pipeline, content):
    """A single-file submission whose file is missing until ``restore()``."""
    name = f"later-{uuid.uuid4().hex[:6]}.jpg"
    source = FIXTURES / "call911.jpg"

    def restore():
        shutil.copy(source, content.root / name)

    return {
        "type": "file",
        "payload_url": f"{content.url}/{name}",
        "digest_type": "md5",
        "digest_value": hashlib.md5(source.read_bytes()).hexdigest(),
        "restore": restore,
    }


def test_a_job_merritt_requeued_and_that_failed_again_resumes_here_and_completes(
    pipeline, demo_file, make_client, client, django_user_model
):
    store = pipeline.store
    restore = demo_file.pop("restore")
    bid = pipeline.submit(**demo_file)
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == JobStatus.FAILED
    failed_in = resume_target(job.last_successful_status)

    zk, ingest = merritt(make_client)
    ingest.requeue(zk.load(Item("job", job.jid)), failed_in)  # MerrittZK: Failed -> step
    assert store.jobs.get_job(job.jid).last_successful_status == "Failed"
    pipeline.run(bid, until=lambda b: store.jobs.get_job(job.jid).status == JobStatus.FAILED)
    again = store.jobs.get_job(job.jid)
    assert again.last_successful_status == "Failed"  # it failed again: how far is unknown

    restore()
    mirror.apply_job(again)
    client.force_login(admin(django_user_model))
    page = client.get(f"/actions/job.resume/confirm?ids={job.jid}")
    assert STEP.findall(page.content.decode()) == [JobStatus.PENDING]
    client.post(
        "/actions/job.resume/execute", {"payload": payload_of(page), "reason": "file is back"}
    )
    assert store.jobs.get_job(job.jid).status == JobStatus.PENDING
    pipeline.run(bid, until=lambda b: store.jobs.get_job(job.jid).status in ("Completed", "Failed"))
    done = store.jobs.get_job(job.jid)
    assert done.status == JobStatus.COMPLETED, done.message


# --- 6. Collection holds: Merritt names them by profile ---------------------------------


@pytest.fixture
def demo_profile(db):
    return Profile.objects.create(
        name="demo_content", collection="demo", minter_shoulder="ark:/99999/fk4"
    )


def test_a_collection_hold_here_holds_merritts_job_of_its_profile(
    process_store, demo_profile, make_client
):
    zk, ingest = merritt(make_client)
    assert process_store.holds.hold_collection("demo", by="ada", reason="audit")
    assert zk.check_lock_collection("demo_content")  # the name Merritt's ingest checks
    batch = ingest.submit("demo_content")
    job = ingest.initialize()
    assert job is not None and job.status == JobStatus.HELD
    assert process_store.holds.read_collection_hold("demo") == {
        "by": "ada",
        "reason": "audit",
        "at": ANY,
    }
    (jid,) = process_store.batches.batch_jobs(batch.id)["batch-processing"]
    assert process_store.jobs.get_job(jid).status == JobStatus.HELD


class _Any:
    def __eq__(self, other):
        return True


ANY = _Any()


@pytest.mark.parametrize("held_by", ["here", "merritt"])
def test_our_workers_hold_a_merritt_written_job_of_a_held_collection(
    pipeline, make_client, held_by
):
    """A job MerrittZK wrote with createJobConfiguration's keys (profile_name, payload_url,
    payload_type) is one our workers can run; one in mrt-ingest's own format is left to
    Merritt's ingest (whose InitializeConsumer holds it: the test above)."""
    Profile.objects.create(name="demo_content", collection="demo", minter_shoulder="ark:/99999/fk4")
    zk, ingest = merritt(make_client)
    if held_by == "here":
        pipeline.store.holds.hold_collection("demo", by="ada")
    else:
        assert zk.lock_collection("demo_content")
    zk.create_batch({"profile": "demo_content", "payload_url": "https://example.org/a.txt"})
    batch = zk.acquire_pending_batch()
    configuration = {
        "profile_name": "demo_content",
        "submitter": "merritt-tester",
        "payload_url": "https://example.org/a.txt",
        "payload_type": "file",
        "response_type": "json",
    }
    ours_to_run = zk.create_job(batch.id, configuration)
    (theirs,) = ingest.create_jobs(batch, 1)
    zk.set_status(batch, "Reporting")
    zk.unlock(batch)
    for _ in range(3):
        pipeline.step()
    job = pipeline.store.jobs.get_job(ours_to_run.id)
    assert job.status == JobStatus.HELD, job.message
    assert "on hold" in job.message
    assert pipeline.store.jobs.get_job(theirs.id).status == JobStatus.PENDING


def test_asking_whether_an_item_is_held_costs_one_round_trip_and_no_query_when_none_is(
    process_store, demo_profile, django_assert_num_queries
):
    """Every Pending job and batch asks: with no hold anywhere the answer is one listing."""
    store = process_store
    theirs = {"profile_name": "demo_content"}  # Merritt's: only a profile, no collection
    ours = {"collection": "demo", "profile": "demo_content"}
    rounds = store.stats["round_trips"]
    with django_assert_num_queries(0):
        assert store.holds.item_hold(theirs) is None and store.holds.item_hold(ours) is None
    assert store.stats["round_trips"] - rounds == 2
    store.holds.hold_collection("other")
    rounds = store.stats["round_trips"]
    assert store.holds.item_hold(ours) is None
    assert store.stats["round_trips"] - rounds == 1
    store.holds.hold_collection("demo")
    assert store.holds.item_hold(theirs) == "collection demo is on hold"
    store.holds.release_collection("demo")
    store.client.create(t.collection_lock("demo_content"), makepath=True)  # as Merritt does
    moved = {"collection": "elsewhere", "profile_name": "demo_content"}
    assert store.holds.item_hold(moved) == (
        "profile demo_content is on hold (a collection hold set in Merritt)"
    )


def test_release_all_releases_the_held_items_of_both_sides(
    process_store, demo_profile, make_client
):
    store = process_store
    zk, ingest = merritt(make_client)
    store.holds.hold_collection("demo", by="ada")
    ours = store.new_batches.create_batch(
        {"batchID": "ours", "collection": "demo", "profile": "demo_content"}
    )
    our_job = store.new_jobs.create_job(ours.id, {"collection": "demo", "profile": "demo_content"})
    store.moves.transition_job(our_job, JobStatus.HELD, "collection demo is on hold")
    theirs = ingest.submit("demo_content")
    assert ingest.initialize().status == JobStatus.HELD
    (their_job,) = store.batches.batch_jobs(theirs.id)["batch-processing"]
    other = store.new_jobs.create_job(ours.id, {"collection": "other"})
    store.moves.transition_job(other, JobStatus.HELD)

    result = store.held.release_collection_items("demo", "released by ada")
    assert sorted(result.released) == sorted([our_job, their_job]) and not result.skipped
    assert store.jobs.get_job(other).status == JobStatus.HELD
    assert store.holds.release_collection("demo")
    assert not zk.check_lock_collection("demo") and not zk.check_lock_collection("demo_content")


def test_a_hold_merritt_set_by_profile_is_a_hold_of_the_profiles_collection(
    process_store, demo_profile, make_client
):
    zk, _ = merritt(make_client)
    assert zk.lock_collection("demo_content")
    assert process_store.holds.is_collection_held("demo")
    mirror.sync_collections(
        {name: {} for name in process_store.holds.held_collections()}, timezone.now()
    )
    from batches.models import Collection

    assert list(Collection.objects.filter(held=True).values_list("mnemonic", flat=True)) == ["demo"]


def test_a_scoped_operator_may_act_on_merritts_job_of_their_collection(
    client, process_store, demo_profile, make_client, django_user_model
):
    _, ingest = merritt(make_client)
    batch = ingest.submit("demo_content")
    (jid,) = process_store.batches.batch_jobs(batch.id)["batch-processing"]
    mirror.apply_job(process_store.jobs.get_job(jid))
    assert Job.objects.get(jid=jid).collection == ""  # Merritt wrote no collection
    client.force_login(admin(django_user_model, "otto", "operator", collections=["demo"]))

    listed = client.get("/jobs/?collection=demo").content.decode()
    assert jid in listed
    page = client.get(f"/actions/job.hold/confirm?ids={jid}")
    body = page.content.decode()
    assert "outside your collections" not in body and 'name="payload"' in body, body
    client.post("/actions/job.hold/execute", {"payload": payload_of(page), "reason": "check"})
    assert process_store.jobs.get_job(jid).status == JobStatus.HELD


# --- 7. Local-id locks: Merritt's name ----------------------------------------------------

OWNER = "ark:/13030/j2cc0900"


def test_our_local_id_lock_is_the_one_merritt_takes(process_store, make_client, db):
    zk, _ = merritt(make_client)
    profile = Profile(name="demo_content", collection="demo", owner="Demo Library", owner_ark=OWNER)
    key = localid_lock_key("lid-1", profile)
    assert process_store.locks.lock_localid(key)
    assert not zk.lock_object_localid("lid-1_" + OWNER)  # ProcessManager.getLocalIDLock
    process_store.locks.unlock_localid(key)
    assert zk.lock_object_localid("lid-1_" + OWNER)
    assert not process_store.locks.lock_localid(key)
    assert process_store.client.exists("/locks/localid/lid-1_ark_13030_j2cc0900")


def test_processing_waits_while_merritt_holds_the_local_id(pipeline, content, make_client):
    pipeline.profile.owner_ark = OWNER
    pipeline.profile.save()
    zk, _ = merritt(make_client)
    assert zk.lock_object_localid("lid-2_" + OWNER)
    bid = pipeline.submit(
        type="file",
        payload_url=f"{content.url}/call911.jpg",
        local_id="lid-2",
    )

    def waiting(_batch):
        (job,) = pipeline.jobs(bid) or (None,)
        return job is not None and "being resolved by another job" in job.message

    pipeline.run(bid, until=waiting)
    (job,) = pipeline.jobs(bid)
    assert job.status == JobStatus.PROCESSING
    zk.unlock_object_localid("lid-2_" + OWNER)
    batch = pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == JobStatus.COMPLETED, (batch.message, job.message)


# --- 8. Configuration keys of both sides --------------------------------------------------


def test_merritts_jid_reads_the_jid_of_a_job_submitted_here(pipeline, content, make_client):
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid, until=lambda b: b.status != "Pending")
    (job,) = pipeline.jobs(bid)
    zk, _ = merritt(make_client)
    loaded = zk.load(Item("job", job.jid))
    assert loaded.data["jobID"] == job.jid  # Job.jid()
    assert loaded.data["profile_name"] == loaded.data["profile"] == "demo"  # profileName()


def test_a_job_in_merritts_configuration_keys_shows_its_profile(
    client, process_store, make_client, django_user_model
):
    zk, _ = merritt(make_client)
    zk.create_batch({"batchID": "m", "profile": "merritt_content"})
    bid = zk.acquire_pending_batch().id  # BatchConsumer: the batch is Processing
    configuration = {  # Job.createJobConfiguration
        "profile_name": "merritt_content",
        "submitter": "merritt-tester",
        "payload_url": "https://example.org/a.txt",
        "payload_type": "file",
        "response_type": "json",
    }
    job = zk.create_job(bid, configuration)
    mirror.apply_job(process_store.jobs.get_job(job.id))
    assert Job.objects.get(jid=job.id).profile == "merritt_content"
    client.force_login(admin(django_user_model))
    page = client.get(f"/jobs/{job.id}/").content.decode()
    assert "merritt_content" in page


@pytest.mark.parametrize("mode", ["all", "own"])
def test_a_stray_step_of_a_job_left_to_merritt_leaves_it_untouched(
    pipeline, make_client, settings, mode
):
    """The dispatcher never enqueues such a job; an RQ job enqueued anyway (an older
    dispatcher, a hand) is refused under the lock, before any handler, at every step."""
    from jobs.tasks import run_job_step

    settings.MQ_WORKERS = mode
    Profile.objects.create(name="demo_content", collection="demo", minter_shoulder="ark:/99999/fk4")
    zk, ingest = merritt(make_client)
    pipeline.store.holds.hold_collection("demo", by="ada")  # a hold would otherwise move it
    batch = ingest.submit("demo_content")
    (jid,) = pipeline.store.batches.batch_jobs(batch.id)["batch-processing"]
    before = pipeline.store.jobs.get_job(jid)
    assert run_job_step(jid, "Pending") == "merritt"
    after = pipeline.store.jobs.get_job(jid)
    assert (after.status, after.status_version, after.locked) == (
        "Pending",
        before.status_version,
        False,
    )
    taken = zk.acquire_job("Pending")  # Merritt's ingest moves it on
    zk.set_status(taken, "Estimating")
    zk.unlock(taken)
    assert run_job_step(jid, "Estimating") == "merritt"  # no KeyError: 'payload_url'
    assert pipeline.store.jobs.get_job(jid).status == "Estimating"
