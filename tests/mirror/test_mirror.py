"""The Django mirror follows ZooKeeper: write-through, watches, full rebuilds and drift."""

from __future__ import annotations

import io
import re
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.urls import reverse
from django.utils import timezone
from kazoo.client import KazooClient

from batches.models import Batch, BatchEvent, Collection, Profile
from jobs.context_processors import freshness_text, mirror_freshness
from jobs.models import Job, JobEvent, MirrorState
from merritt_queue.core import multiread, snapshot
from merritt_queue.core import tree as t
from merritt_queue.core.states import JOB_STEPS
from merritt_queue.project import checks, runtime
from mirror import facade as mirror
from mirror import writethrough
from mirror.follow import Follower
from tests.mirrorlive import CONFIG, SUBMISSION, make_jobs, seen_as, wait_for

pytest_plugins = ["tests.httpserver", "tests.pipelinerun", "tests.mirrorlive"]

BATCH_EVENT_FIELDS = (
    "bid",
    "status_version",
    "from_status",
    "to_status",
    "at",
    "message",
    "actor",
    "exact",
)
EVENT_FIELDS = ("jid", *BATCH_EVENT_FIELDS, "retry_count")


# --- write-through ------------------------------------------------------------------------


def test_a_write_through_the_core_is_in_the_mirror_at_once_with_its_actor(live, db):
    live.changes.default_actor = "admin:ann"
    bid = live.new_batches.create_batch(SUBMISSION).id
    batch = Batch.objects.get(bid=bid)
    assert (batch.status, batch.uuid, batch.collection, batch.submitter) == (
        "Pending",
        "b-1",
        "demo",
        "sam",
    )
    assert batch.title == "A batch" and batch.submitted is not None
    jid = live.new_jobs.create_job(
        bid,
        CONFIG,
        identifiers={"primary_id": "ark:/99999/fk4x", "local_id": ["a", "b"]},
        metadata={"erc_what": "The title"},
    )
    job = Job.objects.get(jid=jid)
    assert (job.status, job.batch_id, job.ark, job.local_id, job.title) == (
        "Pending",
        bid,
        "ark:/99999/fk4x",
        "a; b",  # every local id, joined
        "The title",
    )
    assert (job.collection, job.profile, job.submitter, job.status_version) == (
        "demo",
        "demo",
        "sam",
        0,
    )
    live.moves.hold_job(jid, "asked by the depositor")
    job.refresh_from_db()
    assert job.status == "Held" and job.message == "asked by the depositor"
    events = list(JobEvent.objects.filter(jid=jid).values_list("from_status", "to_status", "actor"))
    assert events == [("", "Pending", "admin:ann"), ("Pending", "Held", "admin:ann")]
    batch.refresh_from_db()
    assert (batch.job_counts, batch.job_total) == ({"Held": 1}, 1)
    assert MirrorState.objects.filter(name="write-through").exists()


def test_data_writes_priority_and_removal_are_written_through(live, db):
    bid, (jid,) = make_jobs(live, 1)
    live.job_data.save_job_data(jid, "identifiers", {"primary_id": "ark:/1/z", "local_id": []})
    live.job_data.set_priority(jid, 2)
    job = Job.objects.get(jid=jid)
    assert (job.ark, job.local_id, job.priority) == ("ark:/1/z", "l0", 2)
    # The data write is not a status write; the priority change is (it moves the status
    # version on so that a worker holding an older record cannot commit it).
    assert JobEvent.objects.filter(jid=jid).count() == 2
    live.moves.hold_job(jid)
    live.moves.delete_job(jid)
    live.removal.purge_job(jid)
    assert Job.objects.get(jid=jid).removed_at is not None  # the row stays, as history
    assert JobEvent.objects.filter(jid=jid).count() == 4
    assert Batch.objects.get(bid=bid).job_total == 1


def test_data_written_mid_step_reaches_the_row_without_reading_the_job(live, db, monkeypatch):
    _, (jid,) = make_jobs(live, 1)
    before = Job.objects.get(jid=jid).read_at
    monkeypatch.setattr(live.jobs, "get_job", pytest.fail)  # no read back from ZooKeeper
    live.job_data.set_space_needed(jid, 4096)
    live.job_data.save_job_data(jid, "store", {"manifest_url": "file:///m", "version": 2})
    live.job_data.save_job_data(jid, "inventory", None)
    job = Job.objects.get(jid=jid)
    assert job.space_needed == 4096 and job.inventory is None
    assert job.store == {"manifest_url": "file:///m", "version": 2}
    assert job.read_at > before  # a full rebuild that read before this write keeps it


def test_a_step_commit_carries_the_data_its_handler_wrote(live, db):
    _, (jid,) = make_jobs(live, 1)
    job = live.job_locks.lock_job(jid)  # read before the handler writes its ARK
    live.job_data.save_job_data(jid, "identifiers", {"primary_id": "ark:/1/m", "local_id": []})
    live.moves.fail_job(job, "then storage failed", release_lock=True)
    row = Job.objects.get(jid=jid)
    assert (row.status, row.ark, row.locked) == ("Failed", "ark:/1/m", False)


def test_a_chain_s_writes_held_back_reach_the_mirror_together_with_every_event(
    live, db, monkeypatch
):
    bid, (jid,) = make_jobs(live, 1)
    with live.changes.deferred():
        job = live.job_locks.lock_job(jid)
        live.job_data.set_space_needed(jid, 10)
        job = live.moves.succeed_job(job, keep_lock=True)
        # A data write a later commit carries is not read back from ZooKeeper.
        monkeypatch.setattr(live.jobs, "get_job", pytest.fail)
        live.job_data.save_job_data(jid, "identifiers", {"primary_id": "ark:/1/c", "local_id": []})
        job = live.moves.succeed_job(job, "provisioned")
        assert Job.objects.get(jid=jid).status == "Pending"  # nothing told yet
    row = Job.objects.get(jid=jid)
    assert (row.status, row.space_needed, row.ark, row.message, row.locked) == (
        "Provisioning",
        10,
        "ark:/1/c",
        "provisioned",
        False,
    )
    events = JobEvent.objects.filter(jid=jid).order_by("status_version")
    assert [(e.from_status, e.to_status) for e in events] == [
        ("", "Pending"),
        ("Pending", "Estimating"),
        ("Estimating", "Provisioning"),
    ]
    assert Batch.objects.get(bid=bid).job_counts == {"Provisioning": 1}


def test_writes_held_back_replace_the_watcher_s_view_of_a_later_one(live, db):
    live.changes.default_actor = "worker"
    _, (jid,) = make_jobs(live, 1)
    with live.changes.deferred():
        job = live.job_locks.lock_job(jid)
        for _ in range(3):  # Estimating, Provisioning, Downloading
            job = live.moves.succeed_job(job, keep_lock=True)
        # reconcile --watch reads the job now, and mirrors it before the worker's flush.
        mirror.apply_jobs([live.jobs.get_job(jid)], actor="watch")
        live.moves.succeed_job(job, "downloaded")
    events = JobEvent.objects.filter(jid=jid).order_by("status_version")
    assert [(e.status_version, e.from_status, e.to_status, e.actor) for e in events] == [
        (0, "", "Pending", "worker"),
        (1, "Pending", "Estimating", "worker"),
        (2, "Estimating", "Provisioning", "worker"),
        # The watcher only saw a jump to it; the worker's own row replaces that.
        (3, "Provisioning", "Downloading", "worker"),
        (4, "Downloading", "Processing", "worker"),
    ]
    assert all(e.exact for e in events)
    assert Job.objects.get(jid=jid).status == "Processing"


def test_a_held_back_data_write_no_later_record_carries_is_still_written(live, db):
    _, (jid,) = make_jobs(live, 1)
    with live.changes.deferred():
        live.moves.hold_job(jid)
        live.job_data.set_space_needed(jid, 99)
    row = Job.objects.get(jid=jid)
    assert (row.status, row.space_needed) == ("Held", 99)


def test_an_older_record_never_overwrites_a_newer_row(live, db):
    _, (jid,) = make_jobs(live, 1)
    old = live.jobs.get_job(jid)
    live.moves.hold_job(jid)
    mirror.apply_job(old, actor="late")
    assert Job.objects.get(jid=jid).status == "Held"
    assert not JobEvent.objects.filter(actor="late").exists()


def test_a_failing_mirror_never_fails_the_write(live, db, monkeypatch, caplog):
    def broken(*_):
        raise RuntimeError("database on fire")

    monkeypatch.setattr(writethrough, "apply_change", broken)
    bid = live.new_batches.create_batch(SUBMISSION).id
    assert live.batches.get_batch(bid).status == "Pending"
    assert "mirror write-through of batch" in caplog.text


def test_without_django_set_up_the_listener_does_nothing(live, db, monkeypatch):
    monkeypatch.setattr(writethrough, "_django_ready", lambda: False)
    live.new_batches.create_batch(SUBMISSION)
    assert not Batch.objects.exists()


def test_write_through_can_be_switched_off(zk_config, settings, db):
    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    settings.MQ_MIRROR_WRITE_THROUGH = False
    runtime.close()
    try:
        assert runtime.get_store().changes.listeners == []
    finally:
        runtime.close()


# --- full reconcile -----------------------------------------------------------------------


def test_a_full_rebuild_restores_every_batch_and_job_after_the_mirror_is_emptied(store, db):
    bids = []
    for _ in range(3):
        bid, jids = make_jobs(store, 4)
        bids.append(bid)
        store.moves.transition_job(jids[0], "Estimating")
    first = mirror.full_reconcile(store)
    assert (first.jobs, first.batches, len(first.added)) == (12, 3, 15)
    timeline = list(JobEvent.objects.values_list(*EVENT_FIELDS))
    batch_timeline = list(BatchEvent.objects.values_list(*BATCH_EVENT_FIELDS))
    assert len(timeline) >= 12 and len(batch_timeline) == 3
    Job.objects.all().delete()
    Batch.objects.all().delete()
    JobEvent.objects.all().delete()
    BatchEvent.objects.all().delete()

    drift = mirror.full_reconcile(store)
    assert sorted(drift.added) == sorted(bids + store.jobs.list_job_ids())
    assert not drift.changed and not drift.removed
    assert Job.objects.count() == 12 and Batch.objects.count() == 3
    for bid in bids:
        batch = Batch.objects.get(bid=bid)
        assert batch.job_counts == {"Estimating": 1, "Pending": 3} and batch.job_total == 4
    # Every status write the history nodes hold, restored (tests/mirror/test_history_rebuild.py
    # checks them against the nodes, field by field).
    assert list(JobEvent.objects.values_list(*EVENT_FIELDS)) == timeline
    assert list(BatchEvent.objects.values_list(*BATCH_EVENT_FIELDS)) == batch_timeline
    assert MirrorState.objects.get(name="full").detail["added"] == 15


def test_the_drift_report_counts_added_changed_and_removed_rows(store, live, db):
    # ``store`` has no listener: its writes are those of another host, seen by a rebuild only.
    _, (kept, edited, purged) = make_jobs(store, 3)
    mirror.full_reconcile(store)
    Job.objects.filter(jid=edited).update(status="Failed", title="edited by hand")
    store.moves.hold_job(purged)
    store.moves.delete_job(purged)
    store.removal.purge_job(purged)
    _, (added,) = make_jobs(store, 1, bid=store.jobs.get_job(kept).bid)

    drift = mirror.full_reconcile(store)
    assert (drift.added, drift.changed, drift.removed) == ([added], [edited], [purged])
    assert Job.objects.get(jid=edited).status == "Pending"
    out = io.StringIO()
    call_command("reconcile", "--full", stdout=out)
    assert "added: 0" in out.getvalue() and "jobs/s" in out.getvalue()


def test_a_non_positive_reconcile_period_is_e008(settings):
    settings.MQ_RECONCILE_SECONDS = 0
    assert [m.id for m in checks.check_reconcile_seconds()] == ["mq.E008"]


def test_reconcile_takes_exactly_one_of_full_and_watch(db):
    for argv in ([], ["--full", "--watch"]):
        with pytest.raises(CommandError):
            call_command("reconcile", *argv)


def test_a_row_written_while_the_rebuild_reads_is_not_removed(store, db, monkeypatch):
    make_jobs(store, 1)
    read_listing = snapshot.read_listing

    def listing_then_a_new_job(client):
        listing = read_listing(client)
        _, (jid,) = make_jobs(store, 1)
        mirror.apply_job(store.jobs.get_job(jid), actor="worker")  # a write-through meanwhile
        return listing

    monkeypatch.setattr(snapshot, "read_listing", listing_then_a_new_job)
    drift = mirror.full_reconcile(store)
    assert not drift.removed and Job.objects.count() == 2


def test_collections_holds_and_locks_are_mirrored(store, make_store, db):
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    Collection.objects.create(mnemonic="kept", held_by="bob", held_reason="set by an admin")
    store.holds.hold_collection("kept")
    store.holds.hold_collection("audit", by="ann", reason="checking rights")
    store.pause.pause_queue()
    _, (jid,) = make_jobs(store, 1)
    store.locks.lock_storage("ark:/1/a", owner=jid)
    worker = make_store()
    worker.job_locks.lock_job(jid)

    mirror.full_reconcile(store)
    rows = {c.mnemonic: c for c in Collection.objects.all()}
    assert {n: c.held for n, c in rows.items()} == {"audit": True, "demo": False, "kept": True}
    assert (rows["audit"].held_by, rows["audit"].held_reason) == ("ann", "checking rights")
    assert rows["audit"].held_at is not None
    assert (rows["kept"].held_by, rows["kept"].held_reason) == ("bob", "set by an admin")
    assert Job.objects.get(jid=jid).locked

    detail = MirrorState.objects.get(name="locks").detail
    assert detail["paused"] and detail["paused_at"]
    locks = {entry["path"]: entry for entry in detail["locks"]}
    assert locks["/locks/storage/ark_1_a"]["kind"] == "storage"
    assert locks["/locks/storage/ark_1_a"]["data"] == jid
    assert locks["/locks/collections/audit"]["kind"] == "collection"
    job_lock = locks[t.job_node(jid, "lock")]
    assert job_lock["kind"] == "job" and job_lock["owner"] == hex(worker.session.session_id)

    store.holds.release_collection("audit")
    store.pause.unpause_queue()
    mirror.full_reconcile(store)
    assert not Collection.objects.get(mnemonic="audit").held
    assert not MirrorState.objects.get(name="locks").detail["paused"]


def test_reads_without_multiread_give_the_same_records(store, monkeypatch):
    _, jids = make_jobs(store, 3)
    fast = snapshot.read_jobs(store.client, jids + ["jid9999999999"])
    monkeypatch.setitem(multiread._support, store.client, False)
    slow = snapshot.read_jobs(store.client, jids + ["jid9999999999"])
    assert fast.records == slow.records == {j: store.jobs.get_job(j) for j in jids}
    assert fast.missing == slow.missing == ["jid9999999999"]


def test_many_reads_go_a_window_at_a_time_with_the_same_results(store, monkeypatch):
    _, jids = make_jobs(store, 3)
    paths = [(multiread.GET, f"/jobs/{j}/status") for j in [*jids, "jid9999999999"]]
    whole = multiread.read_many(store.client, paths)
    sent = []
    real = multiread.Reads
    monkeypatch.setattr(multiread, "WINDOW", 2)
    monkeypatch.setattr(multiread, "Reads", lambda c, r: sent.append(len(r)) or real(c, r))
    assert multiread.read_many(store.client, paths) == whole and whole[-1] is None
    assert sent == [2, 2]


# --- following writes made by others ------------------------------------------------------


def test_writes_by_another_client_appear_in_the_mirror_within_seconds(store, zk, follower):
    assert store.changes.listeners == []  # a plain store: nothing is written through
    store.changes.default_actor = "another host"
    bid, (moved, raw, removed) = make_jobs(store, 3)
    follower()
    assert Job.objects.filter(batch_id=bid).count() == 3

    store.moves.transition_job(moved, "Estimating", "estimating elsewhere")
    wait_for(lambda: Job.objects.get(jid=moved).status == "Estimating")
    event = JobEvent.objects.get(jid=moved, to_status="Estimating")
    assert (event.from_status, event.actor, event.message) == (
        "Pending",
        seen_as(store, moved),
        "estimating elsewhere",
    )

    # Written the way MerrittZK does it: separate calls, no multi, no version check.
    status = t.job_status_record("Held", "Pending", 0, "held by MerrittZK")
    zk.set(t.job_node(raw, "status"), t.encode_json(status))
    zk.delete(t.job_index("Pending", 5, raw))
    zk.create(t.job_index("Held", 5, raw))
    wait_for(lambda: Job.objects.get(jid=raw).message == "held by MerrittZK")

    store.moves.hold_job(removed)
    store.moves.delete_job(removed)
    store.removal.purge_job(removed)
    wait_for(lambda: Job.objects.get(jid=removed).removed_at is not None)
    # The row keeps the last status the follower saw (it may not have seen Deleted), and
    # still counts in its batch.
    last = Job.objects.get(jid=removed).status
    assert last in ("Pending", "Held", "Deleted")
    expected = {"Estimating": 1, "Held": 1}
    expected[last] = expected.get(last, 0) + 1
    wait_for(lambda: Batch.objects.get(bid=bid).job_counts == expected)


def test_a_step_the_database_refused_is_applied_by_the_next_step_not_lost(
    store, make_store, transactional_db, monkeypatch
):
    """SQLite's "database table is locked" once failed a step whose changes it had already
    taken: they waited for the next full reconcile, which recorded them as its own."""
    store.changes.default_actor = "another host"
    bid, (moved, _, _) = make_jobs(store, 3)
    runner = Follower(make_store(), reconcile_seconds=3600)
    runner.install_watches()
    runner.reconcile()
    runner.step()  # every state directory listed once: from now on only changes count
    store.moves.transition_job(moved, "Estimating", "estimating elsewhere")
    wait_for(lambda: {"Pending", "Estimating"} <= runner._dirty_dirs)

    real = mirror.apply_jobs

    def locked(records, **kwargs):
        raise OperationalError("database table is locked: jobs_job")

    monkeypatch.setattr(mirror, "apply_jobs", locked)
    with pytest.raises(OperationalError):
        runner.step()
    monkeypatch.setattr(mirror, "apply_jobs", real)
    runner.step()
    assert Job.objects.get(jid=moved).status == "Estimating"
    event = JobEvent.objects.get(jid=moved, to_status="Estimating")
    assert (event.from_status, event.actor) == ("Pending", seen_as(store, moved))


def test_batch_status_holds_and_pauses_by_another_client_are_followed(store, zk, follower):
    old = store.new_batches.create_batch(SUBMISSION).id
    follower()
    zk.set(t.batch_node(old, "status"), t.encode_json(t.batch_status_record("Held", "raw")))
    wait_for(lambda: Batch.objects.get(bid=old).status == "Held")

    new = store.new_batches.create_batch(dict(SUBMISSION, batchID="b-2")).id
    wait_for(lambda: Batch.objects.filter(bid=new, status="Pending").exists())
    store.batch_moves.hold_batch(new, "on hold")
    wait_for(lambda: Batch.objects.get(bid=new).status == "Held")

    store.holds.hold_collection("demo", by="ann", reason="rights")
    wait_for(lambda: Collection.objects.filter(mnemonic="demo", held=True).exists())
    store.pause.pause_queue()
    wait_for(lambda: MirrorState.objects.get(name="locks").detail["paused"])
    assert MirrorState.objects.filter(name="watch").exists()


def test_following_goes_on_after_the_zookeeper_session_is_lost(store, zk_config, follower):
    bid, (jid,) = make_jobs(store, 1)
    runner = follower()
    client = runner.store.client
    lost_session = client.client_id[0]
    twin = KazooClient(hosts=zk_config.hosts, client_id=client.client_id)
    twin.start(timeout=10)
    twin.stop()  # closing the session under the follower's client: it must start a new one
    twin.close()
    wait_for(lambda: client.connected and client.client_id[0] != lost_session)
    store.moves.transition_job(jid, "Estimating")
    wait_for(lambda: Job.objects.get(jid=jid).status == "Estimating")
    store.batch_moves.hold_batch(bid)
    wait_for(lambda: Batch.objects.get(bid=bid).status == "Held")


def test_a_job_read_in_a_state_its_listing_missed_is_read_again(store, db):
    _, (jid,) = make_jobs(store, 1)
    mirror.full_reconcile(store)
    runner = Follower(store, reconcile_seconds=3600)
    # The listings: the job left Pending, and Held was listed after it had left it again.
    runner._list_due = lambda: {"Pending": [], "Held": [], "Deleted": []}
    store.moves.hold_job(jid)
    runner.step()
    assert Job.objects.get(jid=jid).status == "Held" and jid in runner._recheck
    store.moves.delete_job(jid)
    store.removal.purge_job(jid)
    runner.step()
    assert Job.objects.get(jid=jid).removed_at is not None and not runner._recheck


# --- the pipeline writes through ----------------------------------------------------------


def test_the_pipeline_leaves_every_job_mirrored_with_its_whole_timeline(pipeline, content):
    bid = pipeline.submit(
        type="single-file-batch-manifest", payload_url=f"{content.url}/sampleBatchOfFiles.checkm"
    )
    assert pipeline.run(bid).status == "Completed"
    batch = Batch.objects.get(bid=bid)
    assert batch.status == "Completed" and batch.job_counts == {"Completed": 3}
    steps = ["Pending", *JOB_STEPS, "Completed"]
    for job in Job.objects.filter(batch_id=bid):
        assert job.status == "Completed" and job.ark.startswith("ark:/99999/fk4")
        events = JobEvent.objects.filter(jid=job.jid).order_by("status_version")
        assert [e.to_status for e in events] == steps
        assert [e.from_status for e in events] == ["", *steps[:-1]]


# --- freshness ----------------------------------------------------------------------------


def test_the_freshness_line_names_the_newest_update_and_the_last_full_reconcile(db):
    now = timezone.now()
    states = {"write-through": now - timedelta(seconds=3), "full": now - timedelta(minutes=2)}
    assert freshness_text(states, now) == (
        "Mirror updated 3 s ago (by this site); last full reconcile 2 min ago"
    )
    assert freshness_text({"full": now}, now) == "Mirror last fully reconciled 0 s ago"
    assert "reconcile --full" in freshness_text({}, now)
    mirror.mark("watch", now)
    signed_in = SimpleNamespace(user=SimpleNamespace(is_authenticated=True))
    assert str(mirror_freshness(signed_in)["mirror_freshness"]).startswith(
        "Mirror updated 0 s ago (seen in the queue)"
    )


def test_every_page_shows_the_freshness_line_to_a_signed_in_person_only(client, db):
    mirror.mark("write-through")
    mirror.mark("full")
    assert "Mirror" not in client.get(reverse("login")).content.decode()
    client.force_login(get_user_model().objects.create_user("reader"))
    page = client.get(reverse("login")).content.decode()
    # Seconds, not exact: a loaded machine may take one between the mark and the page.
    line = r"Mirror updated \d s ago \(by this site\); last full reconcile \d s ago"
    assert re.search(line, page)


def test_a_collection_hold_is_written_through_with_who_and_why(db, zk_config, settings):
    from batches.models import Collection
    from merritt_queue.project import runtime

    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    runtime.close()
    try:
        store = runtime.get_store()
        store.holds.hold_collection("demo", by="ada", reason="audit")
        row = Collection.objects.get(mnemonic="demo")
        assert (row.held, row.held_by, row.held_reason) == (True, "ada", "audit")
        store.holds.release_collection("demo")
        assert not Collection.objects.get(mnemonic="demo").held
    finally:
        runtime.close()
