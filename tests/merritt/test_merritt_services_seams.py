"""Smaller seams with Merritt's own ingest (issue 30, point 5).

The other writer is ``harness/merrittzk.py``, a replay of MerrittZK and of mrt-ingest's
consumers on its own session. Each test here failed on the code before its fix.
"""

from __future__ import annotations

import importlib
import io

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from batches.models import Profile
from door.submission import NO_WORKERS_PROBLEM, SubmissionError, submit
from harness.merrittzk import MerrittZK, MerrittZKNodeInvalid
from merritt_queue.core import tree as t
from merritt_queue.core.dispatcher import Dispatcher, DispatcherConfig
from merritt_queue.core.errors import InvalidTransition
from merritt_queue.core.sides import CREATED_BY, CREATED_BY_KEY
from merritt_queue.core.treecheck.consistency import check_tree
from merritt_queue.project import servicechecks
from merritt_queue.project.tasks import TASKS
from pipeline.identify import localid_lock_key, localid_lock_keys
from steering.actions.collectionholds import ALSO_OTHERS_REASON
from steering.models import AdminAction
from tests.objectfixtures import minted
from tests.pages import test_steering_actions
from tests.pages.test_steering_pages import confirm_and_execute

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]
people = test_steering_actions.people  # the same fixture


@pytest.fixture
def queue(process_store):
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    return process_store


# --- manage.py submit follows MQ_WORKERS ---------------------------------------------


def test_the_submit_command_refuses_in_none_mode_as_the_web_door_does(queue, settings):
    settings.MQ_WORKERS = "none"
    before = queue.batches.list_batch_ids()
    with pytest.raises(CommandError) as e:
        call_command(
            "submit", profile="demo", submitter="me", type="file", payload_url="https://e.org/a"
        )
    assert NO_WORKERS_PROBLEM in str(e.value)
    assert queue.batches.list_batch_ids() == before


def test_a_dry_run_still_checks_the_submission_in_none_mode(queue, settings):
    """Before: the dry run stopped at the worker mode and said nothing of the submission."""
    settings.MQ_WORKERS = "none"
    with pytest.raises(CommandError) as e:
        call_command(
            "submit",
            "--dry-run",
            profile="demo",
            submitter="me",
            type="file",
            payload_url="https://e.org/a",
        )
    assert "well-formed (file to profile demo as me)" in str(e.value)
    assert NO_WORKERS_PROBLEM in str(e.value)
    with pytest.raises(CommandError) as e:
        call_command("submit", "--dry-run", profile="demo", payload_url="https://e.org/a")
    assert "type is required" in str(e.value) and NO_WORKERS_PROBLEM in str(e.value)
    settings.MQ_WORKERS = "own"
    out = io.StringIO()
    call_command(
        "submit",
        "--dry-run",
        profile="demo",
        type="file",
        payload_url="https://e.org/a",
        stdout=out,
    )
    assert "would submit: file to profile demo" in out.getvalue()


# --- a batch is created in one multi ---------------------------------------------------


@pytest.fixture
def merritt(make_client) -> MerrittZK:
    return MerrittZK(make_client())


def test_a_batch_node_never_exists_without_its_status_and_states(store, merritt, monkeypatch):
    """Before: the batch node was a sequential create of its own, then the multi; MerrittZK's
    pickup running in between locked the bare node, threw on loading it, and kept the lock."""
    seen: list[object] = []
    commit = store.engine.commit

    def merritt_polls_first(ops, what):
        if what.startswith("create batch"):
            try:
                seen.append(merritt.acquire_pending_batch())
            except MerrittZKNodeInvalid as e:
                seen.append(e)
        return commit(ops, what)

    monkeypatch.setattr(store.engine, "commit", merritt_polls_first)
    bid = store.new_batches.create_batch({"profile": "demo", "type": "file"}, reserved=True).id
    assert seen == [None]
    assert store.reads.children(t.batch_path(bid)) and not store.batches.get_batch(bid).locked
    assert sorted(store.reads.children(t.batch_path(bid))) == [
        "history",
        "states",
        "status",
        "submission",
    ]


def test_batch_ids_stay_unique_and_increasing_beside_merritts_sequential_creates(store, merritt):
    ours = store.new_batches.create_batch({"profile": "demo"}, reserved=True).id
    theirs = merritt.create_batch({"profile": "demo"}).id
    store.engine.client.delete(f"{t.batch_path(theirs)}/status")
    again = store.new_batches.create_batch({"profile": "demo"}, reserved=True).id
    last = merritt.create_batch({"profile": "demo"}).id
    assert ours < theirs < again < last


def test_check_tree_names_a_half_created_batch_merritt_locked(store, merritt):
    bid = store.engine.create_sequential(f"{t.BATCHES}/{t.BATCH_PREFIX}")  # an old creation
    with pytest.raises(MerrittZKNodeInvalid):
        merritt.acquire_pending_batch()
    (finding,) = [f for f in check_tree(store) if f.path == t.batch_path(bid)]
    assert finding.kind == "locked-half-created-batch"
    assert "Merritt's ingest" in finding.reason and "restart" in finding.reason
    assert f"{merritt.zk.client_id[0]:#x}" in finding.reason
    assert finding.repair is None


# --- the local-id lock is named after the owner's ARK ------------------------------------

OWNER_ARK = "ark:/13030/j2cc0900"


def test_the_local_id_lock_is_named_by_the_owners_ark_not_its_name(process_store, merritt, db):
    """Before: the lock was named from ``owner``, free text ("Demo Library" in the demo), so
    Merritt's lock on the same object went unseen and both sides went ahead."""
    profile = Profile.objects.create(
        name="demo_content",
        collection="demo",
        owner="Demo Library",
        owner_ark=OWNER_ARK,
        minter_shoulder="ark:/99999/fk4",
    )
    assert merritt.lock_object_localid(f"lid-1_{OWNER_ARK}")  # ProcessManager.getLocalIDLock
    assert not process_store.locks.lock_localid(localid_lock_key("lid-1", profile))
    assert process_store.client.exists("/locks/localid/lid-1_ark_13030_j2cc0900")


def test_several_local_ids_take_the_lock_merritt_takes_for_them(process_store, merritt, db):
    """mrt-ingest joins a job's local ids into one value (``JobState.setLocalID`` through
    ``MintUtil.sanitize``: trimmed, duplicates dropped, ``;`` between) and locks that value.
    Before, our lock was the depositor's text as written ("lid-1; lid-2 ; lid-1"), a name
    Merritt never takes, so both sides went ahead on the same object."""
    profile = Profile.objects.create(
        name="demo_content",
        collection="demo",
        owner_ark=OWNER_ARK,
        minter_shoulder="ark:/99999/fk4",
    )
    keys = localid_lock_keys(["lid-1; lid-2 ; lid-1"], profile)
    assert list(keys.values())[0] == f"lid-1;lid-2_{OWNER_ARK}"
    assert merritt.lock_object_localid(f"lid-1;lid-2_{OWNER_ARK}")
    assert not process_store.locks.lock_localid(keys["lid-1;lid-2"])
    # Each id alone as well: two of our jobs sharing one of them exclude each other.
    assert keys["lid-1"] == f"lid-1_{OWNER_ARK}" and keys["lid-2"] == f"lid-2_{OWNER_ARK}"
    assert localid_lock_keys(["lid-1"], profile) == {"lid-1": localid_lock_key("lid-1", profile)}


def test_the_owners_ark_is_validated(db):
    profile = Profile(name="p", collection="p", minter_shoulder="ark:/99999/fk4")
    for bad in ("Demo Library", "ark:/13030", "ark:13030/x", "ark:/abc/x", "ark:/13030/x y"):
        profile.owner_ark = bad
        with pytest.raises(ValidationError) as e:
            profile.full_clean()
        assert "owner_ark" in e.value.message_dict
    profile.owner_ark = OWNER_ARK
    profile.full_clean()


def test_without_an_owners_ark_local_ids_are_refused_with_a_clear_message(queue):
    with pytest.raises(SubmissionError) as e:
        submit(
            {
                "profile": "demo",
                "submitter": "me",
                "type": "file",
                "payload_url": "https://e.org/a",
                "local_id": "lid-1",
            }
        )
    assert e.value.problems == [Profile.LOCAL_IDS_REFUSED.format(name="demo")]
    with pytest.raises(ValueError, match="no owner's ARK"):
        localid_lock_key("lid-1", Profile.objects.get(name="demo"))
    bid = submit(
        {"profile": "demo", "submitter": "me", "type": "file", "payload_url": "https://e.org/a"}
    ).bid
    assert queue.batches.get_batch(bid).status == "Pending"


def test_a_job_with_local_ids_fails_in_processing_once_its_profile_has_no_owners_ark(
    pipeline, content
):
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg", local_id="lid-9")
    pipeline.profile.owner_ark = ""  # cleared after the door let it in
    pipeline.profile.save()
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and "has no owner's ARK" in job.message
    assert minted(pipeline) == 0
    assert pipeline.store.client.get_children(t.LOCK_LOCALID) == []


def test_a_system_check_warns_of_profiles_without_an_owners_ark(db):
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    Profile.objects.create(
        name="ok", collection="ok", minter_shoulder="ark:/99999/fk4", owner_ark=OWNER_ARK
    )
    (warning,) = servicechecks.check_profile_owner_arks(databases=["default"])
    assert warning.id == "mq.W080" and "demo" in warning.msg and "ok" not in warning.msg


def test_the_migration_keeps_an_owner_that_is_already_an_ark(db):
    from django.apps import apps

    migration = importlib.import_module("batches.migrations.0009_profile_owner_ark")
    Profile.objects.create(
        name="a", collection="a", minter_shoulder="ark:/99999/fk4", owner=OWNER_ARK
    )
    Profile.objects.create(
        name="b", collection="b", minter_shoulder="ark:/99999/fk4", owner="Demo Library"
    )
    migration.owner_ark_from_owner(apps, None)
    got = dict(Profile.objects.values_list("name", "owner_ark"))
    assert got == {"a": OWNER_ARK, "b": ""}


def test_the_demo_profile_gets_an_owners_ark_new_or_kept(db):
    from batches.management.commands.load_demo import DEMO_OWNER_ARK, Command

    assert Command(stdout=io.StringIO())._profile().owner_ark == DEMO_OWNER_ARK
    Profile.objects.filter(name="demo").update(owner_ark="")  # loaded by an older version
    assert Command(stdout=io.StringIO())._profile().owner_ark == DEMO_OWNER_ARK
    Profile.objects.get(name="demo").full_clean()


# --- a release here lifts only the holds this side placed -------------------------------


@pytest.fixture
def demo_content(db):
    return Profile.objects.create(
        name="demo_content", collection="demo", minter_shoulder="ark:/99999/fk4"
    )


def test_a_release_keeps_the_hold_merritts_admin_set_on_a_profile(
    process_store, demo_content, merritt
):
    """Before: releasing demo here deleted /locks/collections/demo_content, which Merritt's
    admin had set for its own reasons."""
    assert merritt.lock_collection("demo_content")  # the admin tool's lock_collection
    assert process_store.holds.hold_collection("demo", by="ada", reason="audit")
    assert process_store.holds.release_collection("demo")
    assert merritt.check_lock_collection("demo_content")
    assert not merritt.check_lock_collection("demo")
    assert process_store.holds.collection_holds("demo") == {"demo_content": False}
    process_store.holds.hold_collection("demo", by="ada")
    assert process_store.holds.collection_holds("demo") == {"demo": True, "demo_content": False}
    assert process_store.holds.release_collection("demo", also_others=True)
    assert not merritt.check_lock_collection("demo_content")


def test_the_confirmation_page_offers_to_lift_merritts_holds_and_records_it(
    client, process_store, demo_content, merritt, people
):
    merritt.lock_collection("demo_content")
    process_store.holds.hold_collection("demo", by="ada", reason="audit")
    client.force_login(people["administrator"])
    page, _, _ = confirm_and_execute(client, "collection.release", "ids=demo", reason="done")
    assert "under demo_content" in page.content.decode()
    assert 'name="also_others"' in page.content.decode()
    assert merritt.check_lock_collection("demo_content")
    record = AdminAction.objects.get(action="collection.release")
    assert "demo_content stay" in record.items.get().detail
    process_store.holds.hold_collection("demo", by="ada")
    confirm_and_execute(
        client, "collection.release", "ids=demo", reason="Merritt's done too", also_others="1"
    )
    assert not merritt.check_lock_collection("demo_content")
    assert not process_store.holds.is_collection_held("demo")
    record = AdminAction.objects.filter(action="collection.release").latest("pk")
    assert record.reason == f"Merritt's done too ({ALSO_OTHERS_REASON})"


# --- Merritt's cleanup removes our deleted batches ----------------------------------------


def failed_batch(store) -> tuple[str, str]:
    """A batch of ours taken up, with one job, that job Failed."""
    bid = store.new_batches.create_batch({"profile": "demo"}).id
    batch = store.batch_locks.acquire_pending_batch()
    assert batch is not None and batch.bid == bid
    jid = store.new_jobs.create_job(bid, {"profile": "demo"})
    store.batch_locks.unlock_batch(bid)
    store.moves.fail_job(jid, "broken")
    return bid, jid


def test_merritts_cleanup_removes_a_batch_deleted_here(store, merritt):
    """Before: a deletion here removed the empty batch-processing (so MerrittZK's reporting
    would not throw on it), and MerrittZK's deleteCompletedBatches, which looks only at
    batches with that node empty, never removed the batch."""
    held = store.new_batches.create_batch(
        {"profile": "demo", "batchID": "u-held"}, reserved=True
    ).id
    store.batch_moves.hold_batch(held)
    store.batch_moves.delete_batch(held)
    failed, failed_job = failed_batch(store)
    store.batch_moves.transition_batch(failed, "Failed")
    store.batch_moves.delete_batch(failed)
    assert not store.batches.get_batch(failed).locked  # the tombstone is nobody's lock
    assert merritt.acquire_batch_for_reporting() is None  # passes them by, throws on neither
    assert merritt.delete_completed_batches() == [held, failed]
    assert (
        store.batches.list_batch_ids() == [] and store.batches.find_batch_by_uuid("u-held") is None
    )
    assert not store.client.exists(t.job_path(failed_job))


def test_our_cleanup_still_removes_a_deleted_batch_and_no_job_of_it_goes_back_to_work(store):
    bid, jid = failed_batch(store)
    store.batch_moves.transition_batch(bid, "Failed")
    store.batch_moves.delete_batch(bid)
    with pytest.raises(InvalidTransition, match="was deleted"):
        store.moves.transition_job(jid, "Pending")
    assert store.removal.purge_batch(bid) == [jid]
    assert store.batches.list_batch_ids() == []


def test_check_tree_gives_an_old_deleted_batch_its_tombstone(store, merritt):
    bid = store.new_batches.create_batch({"profile": "demo"}, reserved=True).id
    store.batch_moves.hold_batch(bid)
    store.batch_moves.delete_batch(bid)
    for node in ("lock", "states/batch-processing"):  # as a deletion before tombstones left it
        store.client.delete(f"{t.batch_path(bid)}/{node}")
    (finding,) = check_tree(store, repair=True)
    assert finding.kind == "deleted-batch-unremovable-by-merritt" and finding.repaired
    assert check_tree(store) == []
    assert merritt.delete_completed_batches() == [bid]


# --- our held batch follows Merritt's collection lock -------------------------------------


def our_batch(store, **extra) -> str:
    submission = {"collection": "demo", "profile": "demo_content", CREATED_BY_KEY: CREATED_BY}
    return store.new_batches.create_batch(submission | extra, reserved=True).id


def sweep(store, redis) -> None:
    Dispatcher(store, redis, TASKS, DispatcherConfig(ahead=50, workers="own")).sweep()


def test_our_batch_is_held_and_released_with_merritts_collection_lock(
    process_store, demo_content, merritt, redis
):
    """Before: Merritt lifting its lock left our batch Held for good (only a person's
    "Release all held items" here moved it on), and a lock placed showed nothing here
    until a worker picked the batch up."""
    store = process_store
    bid = our_batch(store)
    assert merritt.lock_collection("demo_content")  # the admin tool, on the profile's name
    sweep(store, redis)
    batch = store.batches.get_batch(bid)
    assert batch.status == "Held" and batch.message == "collection demo is on hold"
    merritt.unlock_collection("demo_content")
    sweep(store, redis)
    batch = store.batches.get_batch(bid)
    assert batch.status == "Pending" and "hold that held it was lifted" in batch.message
    assert merritt.acquire_pending_batch() is None  # still ours: reserved


def test_a_batch_a_person_held_here_stays_held_when_merritt_lifts_its_lock(
    process_store, demo_content, merritt, redis
):
    store = process_store
    bid = our_batch(store)
    store.batch_moves.hold_batch(bid, "ada: the depositor asked us to wait")
    merritt.lock_collection("demo_content")
    sweep(store, redis)
    merritt.unlock_collection("demo_content")
    sweep(store, redis)
    batch = store.batches.get_batch(bid)
    assert batch.status == "Held" and batch.message.startswith("ada:")


def test_a_job_a_hold_held_is_released_when_merritt_lifts_it_and_merritts_batches_are_left_alone(
    process_store, demo_content, merritt, redis
):
    store = process_store
    bid = our_batch(store)
    jid = store.new_jobs.create_job(bid, {"collection": "demo", "profile": "demo_content"})
    merritt.lock_collection("demo_content")
    theirs = merritt.create_batch({"profile": "demo_content", "type": "file"})
    store.moves.transition_job(
        jid, "Held", "profile demo_content is on hold (a collection hold set in Merritt)"
    )
    assert store.held.follow_collection_holds() == ([bid], [])
    assert store.batches.get_batch(theirs.id).status == "Pending"  # Merritt's ingest decides
    merritt.unlock_collection("demo_content")
    assert store.held.follow_collection_holds() == ([], [bid, jid])
    assert store.jobs.get_job(jid).status == "Pending"
