"""Jobs and batches removed from ZooKeeper (a purge, the cleanup, retention, Merritt's own
tools) stay in the mirror marked removed: a site keeps years of finished jobs there, found by
ARK, local id or title long after the queue forgot them. Every removal path marks the row
instead of deleting it, and a second full reconcile does not report it again."""

from __future__ import annotations

import io
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.utils import timezone

from batches.models import Batch
from jobs.models import Job
from mirror import facade as mirror
from mirror.follow import Follower
from pipeline import capacity
from steering.maintenance import retention as site_retention
from tests.core.test_index_dirs_retention import batch_of
from tests.mirrorlive import make_jobs
from tests.pages.test_index_dirs_probes import retain_until_done

pytest_plugins = ["tests.mirrorlive"]


def purged(store, jid: str) -> None:
    store.moves.hold_job(jid)
    store.moves.delete_job(jid)
    store.removal.purge_job(jid)


def test_a_purge_written_through_keeps_the_row_marked_removed(live, db):
    bid, (jid, other) = make_jobs(live, 2)
    live.job_data.save_job_data(jid, "identifiers", {"primary_id": "ark:/1/kept", "local_id": []})
    purged(live, jid)
    job = Job.objects.get(jid=jid)
    assert job.removed_at is not None
    assert (job.status, job.ark, job.local_id) == ("Deleted", "ark:/1/kept", "l0")
    assert Job.objects.get(jid=other).removed_at is None
    assert capacity.collection_jobs("demo") == 1  # the door's quota counts the tree's jobs
    assert not job.locked
    # The batch's history: its removed job still counts in it.
    assert Batch.objects.get(bid=bid).job_counts == {"Deleted": 1, "Pending": 1}


def test_the_follower_marks_a_purged_job_removed(store, db):
    _, (jid,) = make_jobs(store, 1)
    mirror.full_reconcile(store)
    runner = Follower(store, reconcile_seconds=3600)
    runner._list_due = lambda: {"Pending": [], "Held": [], "Deleted": []}
    purged(store, jid)
    runner.step()
    job = Job.objects.get(jid=jid)
    assert job.removed_at is not None and job.status in ("Pending", "Deleted")


def test_a_full_reconcile_marks_removed_rows_once_and_is_quiet_after(store, db):
    bid, (jid, kept) = make_jobs(store, 2)
    other, (gone_with_batch,) = make_jobs(store, 1)
    store.moves.transition_job(gone_with_batch, "Failed", "x")
    mirror.full_reconcile(store)
    purged(store, jid)
    store.batch_moves.hold_batch(other)
    store.batch_moves.transition_batch(other, "Deleted")
    store.removal.purge_batch(other)

    drift = mirror.full_reconcile(store)
    assert sorted(drift.removed) == sorted([other, jid, gone_with_batch])
    assert Job.objects.count() == 3 and Batch.objects.count() == 2
    assert Job.objects.get(jid=jid).removed_at is not None
    assert Batch.objects.get(bid=other).removed_at is not None
    assert Job.objects.get(jid=kept).removed_at is None

    again = mirror.full_reconcile(store)
    assert (again.added, again.changed, again.removed) == ([], [], [])
    assert Job.objects.filter(removed_at__isnull=False).count() == 2


def test_a_row_whose_node_comes_back_is_unmarked(store, db):
    _, (jid,) = make_jobs(store, 1)
    mirror.full_reconcile(store)
    record = store.jobs.get_job(jid)
    mirror.remove_jobs([jid])
    assert Job.objects.get(jid=jid).removed_at is not None
    # A read taken before the removal, applied after it (the follower's, at the same
    # version): it says nothing about the node now, so the row stays marked.
    mirror.apply_jobs([record])
    assert Job.objects.get(jid=jid).removed_at is not None
    mirror.full_reconcile(store)  # the node is there (a tree restored from a backup)
    assert Job.objects.get(jid=jid).removed_at is None


def test_the_cleanup_command_leaves_its_rows_marked_removed(process_store, monkeypatch):
    from steering.management.commands import cleanup

    store = process_store
    bid = store.new_batches.create_batch({"batchID": "old", "collection": "demo"}).id
    jid = store.new_jobs.create_job(bid, {"collection": "demo"})
    store.moves.transition_job(jid, "Failed", "x")
    store.batch_moves.transition_batch(bid, "Held")
    store.batch_moves.transition_batch(bid, "Deleted")
    later = timezone.now() + timedelta(days=8)
    monkeypatch.setattr(cleanup, "timezone", SimpleNamespace(now=lambda: later))
    call_command("cleanup", "--older-than", "7d", stdout=io.StringIO())
    assert store.batches.list_batch_ids() == []
    assert Batch.objects.get(bid=bid).removed_at is not None
    assert Job.objects.get(jid=jid).removed_at is not None
    assert Batch.objects.get(bid=bid).job_total == 1


@pytest.fixture(autouse=True)
def _fresh_retention():
    site_retention.forget()
    yield
    site_retention.forget()


def test_the_retention_step_leaves_its_rows_marked_removed(process_store, settings, monkeypatch):
    store = process_store
    bid, jids = batch_of(store, "Completed", "Completed")
    call_command("reconcile", "--full", verbosity=0)
    settings.MQ_CLEANUP_RETENTION_DAYS = 30
    retain_until_done(store, monkeypatch, days=31)
    assert store.batches.list_batch_ids() == []
    assert all(j.removed_at is not None for j in Job.objects.filter(jid__in=jids))
    assert Job.objects.filter(jid__in=jids).count() == 2
    assert Batch.objects.get(bid=bid).removed_at is not None
    drift = mirror.full_reconcile(store)
    assert drift.removed == []
