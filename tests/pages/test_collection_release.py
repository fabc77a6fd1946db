"""Releasing a collection releases what its hold caught (issue 32, finding 4): the release's
confirmation lists the caught batches and jobs and releases them in the same step, or keeps
them Held if the person chooses; "Release all held items" lists what it will release;
``/collections/`` counts held batches; every item is in the audit trail with the reason."""

from __future__ import annotations

import pytest

from batches.models import Profile
from mirror import facade as mirror
from steering.actions.collectionholds import KEEP_CAUGHT_REASON
from steering.models import AdminAction, AdminActionItem
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute

queue, people = base.queue, base.people  # the same fixtures

HOLD = "collection demo is on hold"


@pytest.fixture
def held(queue):
    """Collection demo on hold, with a batch and a job its hold caught and a batch a person
    held one by one; ``(caught batch, caught job, person's batch)``."""
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    queue.holds.hold_collection("demo", by="ada", reason="storage migration")
    caught_batch = base.new_batch(queue)
    queue.batch_moves.hold_batch(caught_batch, HOLD)
    caught_job = queue.new_jobs.create_job(base.new_batch(queue), {"collection": "demo"})
    queue.moves.hold_job(caught_job, HOLD)
    own = base.new_batch(queue)
    queue.batch_moves.hold_batch(own, "held by ada: checking its manifest")
    mirror.full_reconcile(queue)
    return caught_batch, caught_job, own


def test_the_release_lists_what_the_hold_caught_and_releases_it_in_the_same_step(
    client, queue, people, held
):
    caught_batch, caught_job, own = held
    client.force_login(people["administrator"])
    page, done, _ = confirm_and_execute(
        client, "collection.release", "ids=demo", reason="migration over"
    )
    body = page.content.decode()
    assert "What the hold on demo caught, Held now" in body
    assert "<strong>1</strong> batch and <strong>1</strong> job" in body
    assert f'href="/batches/{caught_batch}/"' in body and f'href="/jobs/{caught_job}/"' in body
    assert own not in body  # held by a person, not by the hold
    assert 'name="caught" value="release" checked' in body and 'value="keep"' in body
    assert done.status_code == 302

    assert not queue.holds.is_collection_held("demo")
    assert queue.batches.get_batch(caught_batch).status == "Pending"
    job = queue.jobs.get_job(caught_job)
    assert job.status == "Pending"
    assert job.message == "released with the collection's hold by ada: migration over"
    assert queue.batches.get_batch(own).status == "Held"
    record = AdminAction.objects.get(action="collection.release")
    assert record.reason == "migration over"
    (row,) = record.items.filter(part_of="")
    assert "released 2 item(s) its hold caught" in row.detail
    along = {r.item_id: r for r in AdminActionItem.objects.filter(part_of="demo")}
    assert set(along) == {caught_batch, caught_job}
    assert (along[caught_batch].before_status, along[caught_batch].after_status) == (
        "Held",
        "Pending",
    )


def test_only_lifting_the_hold_keeps_what_it_caught_held_for_good(client, queue, people, held):
    caught_batch, caught_job, _ = held
    client.force_login(people["administrator"])
    confirm_and_execute(
        client, "collection.release", "ids=demo", reason="check them first", caught="keep"
    )
    assert not queue.holds.is_collection_held("demo")
    kept = f"kept on hold when the hold was lifted by ada: check them first ({KEEP_CAUGHT_REASON})"
    assert (
        queue.batches.get_batch(caught_batch).status,
        queue.batches.get_batch(caught_batch).message,
    ) == (
        "Held",
        kept,
    )
    assert queue.jobs.get_job(caught_job).message == kept
    # The dispatcher no longer takes them for items a hold held.
    assert queue.held.follow_collection_holds() == ([], [])
    assert queue.jobs.get_job(caught_job).status == "Held"
    record = AdminAction.objects.get(action="collection.release")
    assert record.reason == f"check them first ({KEEP_CAUGHT_REASON})"
    assert AdminActionItem.objects.filter(part_of="demo").count() == 2


def test_release_all_lists_every_held_item_before_it_releases_them(client, queue, people, held):
    caught_batch, caught_job, own = held
    client.force_login(people["administrator"])
    page, _, _ = confirm_and_execute(
        client, "collection.release_all", "ids=demo", reason="all of them"
    )
    body = page.content.decode()
    assert "Held in demo, released by this action" in body
    assert "<strong>2</strong> batches and <strong>1</strong> job" in body
    assert all(
        f"/{kind}/{i}/" in body
        for kind, i in (("batches", caught_batch), ("batches", own), ("jobs", caught_job))
    )
    assert {queue.batches.get_batch(b).status for b in (caught_batch, own)} == {"Pending"}
    assert queue.jobs.get_job(caught_job).status == "Pending"
    assert AdminActionItem.objects.filter(part_of="demo").count() == 3


def test_the_collections_page_counts_held_batches(client, queue, people, held):
    client.force_login(people["administrator"])
    body = client.get("/collections/").content.decode()
    assert "Held batches" in body
    assert 'href="/batches/?collection=demo&amp;status=Held" class="status-held">2</a>' in body


def test_a_hold_merritts_admin_still_has_keeps_the_caught_items_held(client, queue, people, held):
    """The release lifts only the holds placed here (unless asked): the caught items would
    only be held again, so they stay Held, and the result says why."""
    caught_batch, caught_job, _ = held
    Profile.objects.create(name="demo_content", collection="demo", minter_shoulder="ark:/99999/fk4")
    queue.client.create("/locks/collections/demo_content")  # Merritt's admin: no data
    client.force_login(people["administrator"])
    confirm_and_execute(client, "collection.release", "ids=demo", reason="ours is done")
    assert queue.holds.collection_holds("demo") == {"demo_content": False}
    assert queue.batches.get_batch(caught_batch).status == "Held"
    assert queue.jobs.get_job(caught_job).message == HOLD
    row = AdminAction.objects.get(action="collection.release").items.get(part_of="")
    assert "stay Held until those holds are lifted too" in row.detail
