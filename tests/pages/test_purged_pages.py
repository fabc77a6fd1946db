"""Issue 32, minor "Purged items": a purged job's or batch's page is still a 404, but says
what removed it and when; an object's version says its job has gone."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from batches.models import BatchEvent
from door.rights import grant_depositor
from inventory.models import InventoryObject, InventoryVersion
from jobs.models import JobEvent
from steering.models import AdminAction, AdminActionItem
from tests.pages.test_pages_batches_jobs import bid, jid
from tests.roles import viewer

WHEN = timezone.now() - timedelta(days=3)


def purge(name: str, item_id: str, *, collection="", dry_run=None, username="cleanup"):
    record = AdminAction.objects.create(
        action=name,
        username=username,
        scope="queue" if name == "cleanup" else "batch",
        reason="old finished items",
        params={} if dry_run is None else {"older_than": "7d", "dry_run": dry_run},
        token=uuid.uuid4().hex,
        finished=WHEN,
    )
    AdminActionItem.objects.create(
        admin_action=record, item_id=item_id, collection=collection, result="done"
    )
    return record


@pytest.fixture
def history(db):
    JobEvent.objects.create(jid=jid(1), bid=bid(1), to_status="Completed", at=WHEN, exact=True)
    BatchEvent.objects.create(bid=bid(1), to_status="Completed", at=WHEN, exact=True)
    BatchEvent.objects.create(bid=bid(2), to_status="Deleted", at=WHEN, exact=True)


@pytest.fixture
def reader(client, django_user_model):
    client.force_login(viewer(django_user_model.objects.create_user("vera")))
    return client


def test_a_job_purged_with_its_batch_says_so_with_a_404(reader, history):
    purge("cleanup", bid(1), dry_run=True)  # looked, removed nothing
    real = purge("cleanup", bid(1), dry_run=False)
    answer = reader.get(f"/jobs/{jid(1)}/")
    assert answer.status_code == 404
    page = answer.content.decode()
    assert f"Job {jid(1)} was removed from the queue" in page
    assert f"with its batch {bid(1)}" in page and "the scheduled cleanup" in page
    assert WHEN.strftime("%Y-%m-%d") in page and f"/actions/{real.pk}/" in page
    assert "Completed" in page


def test_a_batch_purged_by_hand_names_who_and_when(reader, history):
    record = purge("batch.purge", bid(2), collection="demo", username="ada")
    answer = reader.get(f"/batches/{bid(2)}/")
    assert answer.status_code == 404
    page = answer.content.decode()
    assert "ada" in page and "Purge now (batch)" in page and f"/actions/{record.pk}/" in page


def test_a_depositor_is_told_only_of_their_collections_removals(client, django_user_model, history):
    purge("batch.purge", bid(2), collection="demo", username="ada")
    purge("cleanup", bid(1), dry_run=False)
    dana = django_user_model.objects.create_user("dana")
    grant_depositor(dana, ["other"])
    client.force_login(dana)
    for url in (f"/batches/{bid(2)}/", f"/jobs/{jid(1)}/"):
        answer = client.get(url)
        assert answer.status_code == 404 and "was removed" not in answer.content.decode()
    grant_depositor(dana, ["demo"])
    assert "was removed" in client.get(f"/batches/{bid(2)}/").content.decode()


def test_an_id_never_seen_is_the_bare_404(reader, db):
    answer = reader.get(f"/jobs/{jid(9)}/")
    assert answer.status_code == 404 and "was removed" not in answer.content.decode()


def test_an_objects_version_says_its_job_was_removed(reader, history):
    obj = InventoryObject.objects.create(ark="ark:/99999/fk4gone", collection="demo")
    InventoryVersion.objects.create(obj=obj, number=1, job_id=jid(1), stored=WHEN)
    page = reader.get("/objects/ark:/99999/fk4gone/").content.decode()
    assert "since removed from the queue" in page
