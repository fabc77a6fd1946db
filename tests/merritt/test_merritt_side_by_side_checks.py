"""Side by side with Merritt's ingest: what check_tree says of the batch states that wedge
MerrittZK, the repairs it makes, and the mirror following MerrittZK's locks and local ids.

Merritt's side is harness/merrittzk.py on its own kazoo session: the states are built by its
calls (or by the store where only the queue can make them), and after each repair
MerrittZK is asked to do what it could not before.
"""

from __future__ import annotations

import socket
import time

import pytest
from django.urls import reverse

from batches.models import Batch
from harness.merrittzk import Item, MerrittIngest, MerrittStateError, MerrittZK
from jobs.filters import JobFilter
from jobs.models import Job
from merritt_queue.core import tree as t
from merritt_queue.core.store import QueueStore
from merritt_queue.core.treecheck import consistency
from merritt_queue.core.treecheck.consistency import Finding, check_tree
from mirror import facade as mirror
from tests.mirror.test_check_tree import listing
from tests.mirrorlive import wait_for
from tests.roles import viewer

pytest_plugins = ["tests.mirrorlive"]  # the live follower

SUBMISSION = {"submitter": "merritt-tester", "profile": "demo_profile", "type": "file"}


@pytest.fixture
def merritt(make_client) -> MerrittZK:
    return MerrittZK(make_client())


def check(store: QueueStore, **kw) -> list[Finding]:
    """A check without repair, proving it wrote nothing."""
    before = listing(store.client)
    found = check_tree(store, **kw)
    assert listing(store.client) == before, "a check without repair wrote to the tree"
    return found


def only(findings: list[Finding], kind: str) -> Finding:
    matches = [f for f in findings if f.kind == kind]
    assert len(matches) == 1, f"no single {kind} in {findings}"
    return matches[0]


def read_now(store: QueueStore, grace: float = 300) -> consistency._Checker:
    """A check that has read the tree and planned its repairs, not yet made them."""
    checker = consistency._Checker(
        store.client,
        consistency.read_tree(store.client),
        lock_max_age=3600,
        grace=grace,
        now=time.time(),
    )
    checker.run()
    return checker


def repair(store: QueueStore, kind: str, **kw) -> Finding:
    found = only(check_tree(store, repair=True, **kw), kind)
    assert found.repaired, found.reason
    return found


# --- a: a held batch MerrittZK could take ------------------------------------------


def test_held_batch_without_states_is_given_one_so_merritt_passes_it_by(store, merritt):
    batch = merritt.create_batch(SUBMISSION)
    merritt.set_status(batch, "Held")  # Merritt's admin hold writes the status alone
    bid = batch.id

    found = only(check(store), "held-batch-takeable")
    assert found.path == t.batch_path(bid)
    assert "Merritt's ingest" in found.reason
    assert found.repair == f"create {t.batch_states(bid)}"

    repair(store, "held-batch-takeable")
    assert check(store) == []
    assert merritt.acquire_pending_batch() is None
    batch = store.batches.get_batch(bid)
    assert batch.status == "Held" and not batch.locked
    store.batch_moves.release_batch(bid)  # a release still works on the repaired batch
    assert store.batches.get_batch(bid).status == "Pending"


# --- b: a Processing batch no one will report ----------------------------------------


def test_processing_batch_left_empty_by_merritt_is_failed_after_the_grace_period(
    store, merritt, make_client
):
    taker = MerrittZK(make_client())
    bid = merritt.create_batch(SUBMISSION).id
    assert taker.acquire_pending_batch().id == bid  # then its consumer throws, session ends
    locked = check(store, grace=0)
    assert not [f for f in locked if f.kind == "processing-batch-without-jobs"]
    taker.zk.stop()
    taker.zk.close()

    # Within the grace period it may be a pickup still creating the jobs: no finding.
    assert not [f for f in check(store) if f.kind == "processing-batch-without-jobs"]
    assert store.batches.get_batch(bid).status == "Processing"

    found = only(check(store, grace=0), "processing-batch-without-jobs")
    assert "will ever report it" in found.reason and found.repair == "set the batch Failed"
    repair(store, "processing-batch-without-jobs", grace=0)
    batch = store.batches.get_batch(bid)
    assert batch.status == "Failed" and "submit the deposit again" in batch.message
    assert check(store, grace=0) == []
    store.batch_moves.delete_batch(bid)  # what a person then does: allowed from Failed


def test_processing_batch_repair_leaves_a_batch_locked_since_the_check(store, merritt):
    bid = merritt.create_batch(SUBMISSION).id
    batch = merritt.acquire_pending_batch()
    merritt.unlock(batch)
    checker = read_now(store, grace=0)
    merritt.lock(batch)  # a consumer came back to it between the check and its repair
    checker.repair()
    left = only(checker.findings, "processing-batch-without-jobs")
    assert not left.repaired and "locked now" in left.reason
    assert store.batches.get_batch(bid).status == "Processing"


# --- c: a batch reported while jobs still run ----------------------------------------


def failed_batch_with_a_requeued_job(merritt: MerrittZK) -> tuple[str, str]:
    """Merritt's batch is reported Failed, then an administrator requeues its failed job."""
    ingest = MerrittIngest(merritt)
    batch = ingest.submit("demo_profile")
    assert ingest.initialize() is not None
    job = merritt.acquire_job("Estimating")
    merritt.set_status(job, "Failed", "estimate failed")
    merritt.unlock(job)
    assert ingest.report().id == batch.id
    job = merritt.acquire_job("Failed")
    ingest.requeue(job, "Pending")
    merritt.unlock(job)
    return batch.id, job.id


def test_failed_batch_with_a_running_job_is_update_reported_when_it_finishes(store, merritt):
    bid, jid = failed_batch_with_a_requeued_job(merritt)

    found = only(check(store), "batch-finished-early")
    assert found.path == t.batch_path(bid)
    assert "1 of its jobs are still running" in found.reason and jid in found.reason
    assert found.repair == "set the batch UpdateReporting"
    assert merritt.acquire_update_batch_for_reporting() is None
    batch = merritt.load(Item("batch", bid))
    assert merritt.lock(batch)  # a reporter between its status write and its unlock
    assert only(check(store), "batch-finished-early").repair is None
    merritt.unlock(batch)

    repair(store, "batch-finished-early")
    assert store.batches.get_batch(bid).status == "UpdateReporting"
    assert check(store) == []
    assert merritt.acquire_update_batch_for_reporting() is None  # its job still runs
    MerrittIngest(merritt).finish_jobs()
    assert merritt.acquire_update_batch_for_reporting().id == bid


def test_completed_batch_with_running_jobs_is_reported_only(store, merritt):
    ingest = MerrittIngest(merritt)
    batch = ingest.submit("demo_profile", objects=2)
    merritt.set_status(batch, "Completed")  # a reporter that did not wait for its jobs

    found = only(check(store), "batch-finished-early")
    assert "2 of its jobs are still running" in found.reason and "final" in found.reason
    assert found.repair is None
    before = listing(store.client)
    assert not only(check_tree(store, repair=True), "batch-finished-early").repaired
    assert listing(store.client) == before


# --- d: a deleted batch that blocks Merritt's reporting -------------------------------


def deleted_batch_with_empty_processing_dir(store: QueueStore) -> str:
    """A batch whose only job was held and deleted, then itself held and deleted, its empty
    ``batch-processing`` left behind and no lock (as a delete by MerrittZK leaves it)."""
    bid = store.new_batches.create_batch({"batchID": "uuid-deleted", "collection": "demo"}).id
    jid = store.new_jobs.create_job(bid, {"collection": "demo"})
    store.moves.hold_job(jid)
    store.moves.delete_job(jid)
    store.batch_moves.hold_batch(bid)
    store.batch_moves.delete_batch(bid)
    store.client.delete(t.batch_node(bid, "lock"))  # no tombstone, as MerrittZK's delete
    return bid


def test_deleted_batch_that_blocks_merritt_reporting_loses_its_empty_node(
    store, merritt, make_client
):
    deleted = deleted_batch_with_empty_processing_dir(store)
    node = t.batch_job_dir(deleted, "batch-processing")
    later = MerrittIngest(merritt).submit("demo_profile")
    MerrittIngest(merritt).finish_jobs()
    stuck = MerrittZK(make_client())
    with pytest.raises(MerrittStateError):  # Merritt's reporter takes the deleted one first
        stuck.acquire_batch_for_reporting()
    stuck.zk.stop()  # its lock goes with its session
    stuck.zk.close()

    found = only(check(store), "deleted-batch-blocks-reporting")
    assert found.path == node and "later batches" in found.reason
    repair(store, "deleted-batch-blocks-reporting")
    assert store.client.get_children(node) == []
    assert store.batches.get_batch(deleted).status == "Deleted"
    assert check(store) == []
    assert merritt.acquire_batch_for_reporting().id == later.id  # the tombstone passed by
    assert merritt.delete_completed_batches() == [deleted]


def test_deleted_batch_repair_leaves_a_node_that_gained_a_job(store):
    deleted = deleted_batch_with_empty_processing_dir(store)
    node = t.batch_job_dir(deleted, "batch-processing")
    checker = read_now(store)
    store.client.create(f"{node}/jid9999999999")
    checker.repair()
    left = only(checker.findings, "deleted-batch-blocks-reporting")
    assert not left.repaired and "nothing was written" in left.reason
    assert store.client.exists(f"{node}/jid9999999999")


# --- the mirror follows MerrittZK's locks and local ids -------------------------------


def test_mirror_follows_locks_merritt_takes_and_releases_without_a_status_write(
    store, merritt, follower
):
    ingest = MerrittIngest(merritt)
    batch = ingest.submit("demo_profile")
    jid = merritt.batch_jobs(batch, "batch-processing")[0]
    follower()
    assert not Job.objects.get(jid=jid).locked

    job = merritt.acquire_job("Pending")  # a lock, no status write
    wait_for(lambda: Job.objects.get(jid=jid).locked)
    merritt.unlock(job)
    wait_for(lambda: not Job.objects.get(jid=jid).locked)

    job = merritt.acquire_job("Pending")
    merritt.set_status(job, "Estimating")  # the status, then the unlock in its own call
    wait_for(lambda: Job.objects.get(jid=jid).status == "Estimating")
    merritt.unlock(job)
    wait_for(lambda: not Job.objects.get(jid=jid).locked)

    assert merritt.lock(batch)  # batches too
    wait_for(lambda: Batch.objects.get(bid=batch.id).locked)
    merritt.unlock(batch)
    wait_for(lambda: not Batch.objects.get(bid=batch.id).locked)


def test_mirror_keeps_every_local_id_and_search_finds_a_job_by_any_of_them(
    store, merritt, follower, client, django_user_model
):
    merritt.create_batch(SUBMISSION)
    bid = merritt.acquire_pending_batch().id  # MerrittZK creates jobs in an acquired batch
    ids = {"primary_id": "", "local_id": ["lid-a", "lid-b", "lid-c"]}
    jid = merritt.create_job(bid, {"profile": "demo_profile"}, 5, ids).id
    other = merritt.create_job(bid, {"profile": "demo_profile"}, 5, {"local_id": ["lid-bb"]}).id
    follower()
    assert Job.objects.get(jid=jid).local_id == "lid-a; lid-b; lid-c"

    def found(value):
        return {j.jid for j in JobFilter({"q": value}, queryset=Job.objects.all()).qs}

    # Search is by any part of a local id (issue 16): every id of a job finds it.
    assert found("lid-a") == found("LID-C") == {jid}
    assert found("lid-b") == {jid, other}  # "lid-bb" holds it too
    assert found("lid-bb") == {other}
    assert found("lid") == {jid, other}
    client.force_login(viewer(django_user_model.objects.create_user("librarian")))
    page = client.get(reverse("jobs:detail", args=[jid])).content.decode()
    assert "<dt>Local ids</dt><dd>lid-a; lid-b; lid-c</dd>" in page
    page = client.get(reverse("jobs:detail", args=[other])).content.decode()
    assert "<dt>Local id</dt><dd>lid-bb</dd>" in page


def test_local_ids_that_overflow_the_column_keep_only_whole_ids():
    many = {"local_id": ["x" * 200, "y" * 40, "z" * 20]}
    assert mirror.local_ids_text(many, {}) == "x" * 200 + "; " + "y" * 40
    assert mirror.local_ids_text({"local_id": "single"}, {}) == "single"
    assert mirror.local_ids_text({"local_id": []}, {"local_id": "from-conf"}) == "from-conf"
    assert mirror.local_ids_text({}, {}) == ""


def test_mirror_follows_locks_after_the_follower_s_connection_drops(store, merritt, follower):
    """kazoo lets go of every watch when its connection drops, even when the session lives
    on; the lock watches are armed again, not only at the next full reconcile."""
    ingest = MerrittIngest(merritt)
    batch = ingest.submit("demo_profile")
    jid = merritt.batch_jobs(batch, "batch-processing")[0]
    runner = follower()
    client = runner.store.client
    states: list[str] = []
    client.add_listener(states.append)
    session = client.client_id
    client._connection._socket.shutdown(socket.SHUT_RDWR)  # the network drops it
    wait_for(lambda: states[-2:] == ["SUSPENDED", "CONNECTED"])
    assert client.client_id == session  # the same session: no watch was lost with it

    for _ in range(2):  # more than one change: a reconcile brought forward sees only one
        job = merritt.acquire_job("Pending")
        wait_for(lambda: Job.objects.get(jid=jid).locked)
        merritt.unlock(job)
        wait_for(lambda: not Job.objects.get(jid=jid).locked)
    assert merritt.lock(batch)
    wait_for(lambda: Batch.objects.get(bid=batch.id).locked)
