"""Approval before a batch starts (issue 36, part 1), through the web pages: the awaiting
state (list filter, badge, dashboard count, the batch page with its summary and buttons), the
decisions through the confirmation page (reason, version, audit, roles, scope), the Django
admin's way in, and the depositor told either way."""

from __future__ import annotations

import uuid

import pytest

from batches.models import Batch, Profile
from door import arrival
from door.submission import submit
from mirror import facade as mirror
from notifications.models import Delivery
from steering.models import AdminAction, AdminActionItem, CollectionScope
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute, payload_of

people = base.people


@pytest.fixture
def queue(process_store, monkeypatch):
    Profile.objects.create(
        name="slow", collection="demo", minter_shoulder="ark:/99999/fk4", approval_required=True
    )
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    monkeypatch.setattr(
        arrival, "summarise", lambda data, **kw: {"objects": 2, "profile": kw["profile"]}
    )
    return process_store


def arrive(store, profile="slow") -> str:
    bid = submit(
        {
            "profile": profile,
            "type": "file",
            "submitter": "dora",
            "payload_url": "https://example.org/a.jpg",
            "batchID": uuid.uuid4().hex,
            "notify_emails": "dora@example.org",
            "notify_events": "failures",
        }
    ).bid
    mirrored(store, bid)
    return bid


def mirrored(store, bid):
    mirror.apply_batch(store.batches.get_batch(bid))


def test_a_profile_asks_for_approval_only_when_set(queue):
    waiting, plain = arrive(queue), arrive(queue, profile="demo")
    assert queue.batches.get_batch(waiting).awaiting_approval
    assert queue.batches.get_batch(plain).status == "Pending"
    assert Batch.objects.get(bid=waiting).approval["summary"] == {"objects": 2, "profile": "slow"}
    assert not Profile._meta.get_field("approval_required").default


def test_the_awaiting_state_is_visible_on_every_page(client, queue, people):
    bid, other = arrive(queue), arrive(queue, profile="demo")
    client.force_login(people["operator"])
    page = client.get(f"/batches/{bid}/").content.decode()
    assert 'class="st st-awaiting-approval">Awaiting approval' in page
    assert 'id="approval"' in page and "Pre-flight: what this batch would do" in page
    assert f"/actions/batch.approve/confirm?ids={bid}" in page
    assert f"/actions/batch.reject/confirm?ids={bid}" in page
    assert "batch.release/confirm" not in page and "batch.delete/confirm" not in page
    listed = client.get("/batches/?approval=awaiting").content.decode()
    assert bid in listed and other not in listed
    home = client.get("/").content.decode()
    assert "batches/?approval=awaiting" in home and "awaiting approval" in home


def test_a_summary_that_fails_says_why_and_breaks_nothing(client, queue, people, monkeypatch):
    monkeypatch.undo()

    def broken(data, **kwargs):
        raise RuntimeError("the inventory did not answer")

    monkeypatch.setattr("batches.preflight.summarise", broken)
    bid = arrive(queue)
    client.force_login(people["viewer"])
    page = client.get(f"/batches/{bid}/").content.decode()
    assert "No pre-flight summary" in page and "the inventory did not answer" in page
    assert "batch.approve/confirm" not in page  # a viewer takes no action


def test_an_arriving_batch_carries_the_pre_flight_summary_of_batches_preflight(
    client, queue, people, monkeypatch
):
    monkeypatch.undo()
    bid = arrive(queue)
    summary = Batch.objects.get(bid=bid).approval["summary"]
    assert (summary["profile"], summary["rows"], summary["version"]) == ("slow", 1, 1)
    client.force_login(people["operator"])
    page = client.get(f"/batches/{bid}/").content.decode()
    assert "Pre-flight: what this batch would do" in page and "No pre-flight summary" not in page


def test_approve_starts_it_audited_and_the_depositor_is_told(client, queue, people):
    bid = arrive(queue)
    client.force_login(people["operator"])
    _, done, data = confirm_and_execute(client, "batch.approve", f"ids={bid}", reason="checked")
    assert done.status_code == 302
    batch = queue.batches.get_batch(bid)
    assert batch.status == "Pending" and not batch.awaiting_approval
    assert batch.message == "approved by otto: checked"
    item = AdminActionItem.objects.get(item_id=bid)
    assert (item.result, item.before_status, item.after_status) == (
        "done",
        "Awaiting approval",
        "Pending",
    )
    assert AdminAction.objects.get().reason == "checked"
    again = client.post("/actions/batch.approve/execute", data)  # a double click
    assert again.status_code == 409 and AdminAction.objects.count() == 1
    mirrored(queue, bid)
    (told,) = Delivery.objects.filter(item=bid)  # email asked only failures: told anyway
    assert told.to_status == "Pending" and "checked" in told.payload["message"]


def test_reject_deletes_it_with_the_reason_and_the_depositor_is_told(client, queue, people):
    bid = arrive(queue)
    client.force_login(people["operator"])
    confirm_and_execute(client, "batch.reject", f"ids={bid}", reason="wrong collection")
    batch = queue.batches.get_batch(bid)
    assert batch.status == "Deleted" and batch.message == "rejected by otto: wrong collection"
    mirrored(queue, bid)
    (told,) = Delivery.objects.filter(item=bid)
    assert told.to_status == "Deleted" and "wrong collection" in told.payload["message"]


def test_two_operators_at_once_one_wins_the_other_is_told(client, queue, people, django_user_model):
    bid = arrive(queue)
    client.force_login(people["operator"])
    first = client.get(f"/actions/batch.approve/confirm?ids={bid}")
    client.force_login(people["administrator"])
    other = client.get(f"/actions/batch.reject/confirm?ids={bid}")
    client.post("/actions/batch.reject/execute", {"payload": payload_of(other), "reason": "no"})
    client.force_login(people["operator"])
    client.post("/actions/batch.approve/execute", {"payload": payload_of(first), "reason": "ok"})
    assert queue.batches.get_batch(bid).status == "Deleted"
    late = AdminActionItem.objects.get(admin_action__action="batch.approve")
    assert late.result == "skipped" and "changed since the page was shown" in late.detail


def test_refusals_are_clear(client, queue, people):
    bid = arrive(queue)
    mirrored(queue, bid)
    client.force_login(people["viewer"])
    refused = client.get(f"/actions/batch.approve/confirm?ids={bid}")
    assert refused.status_code == 403 and "needs the operator role" in refused.content.decode()
    CollectionScope.objects.create(user=people["operator"], collections=["other"])
    client.force_login(people["operator"])
    page = client.get(f"/actions/batch.approve/confirm?ids={bid}").content.decode()
    assert "outside your collections" in page
    CollectionScope.objects.filter(user=people["operator"]).delete()
    release = client.get(f"/actions/batch.release/confirm?ids={bid}").content.decode()
    assert "it is Awaiting approval" in release
    plain = arrive(queue, profile="demo")
    queue.batch_moves.hold_batch(plain, "held by otto: wait")
    mirrored(queue, plain)
    page = client.get(f"/actions/batch.approve/confirm?ids={plain}").content.decode()
    assert "awaits no approval" in page
    no_reason = client.post(
        "/actions/batch.approve/execute",
        {"payload": payload_of(client.get(f"/actions/batch.approve/confirm?ids={bid}"))},
    )
    assert (
        no_reason.status_code == 400 and "reason is required" in no_reason.content.decode().lower()
    )
    assert queue.batches.get_batch(bid).awaiting_approval


def test_the_django_admin_action_goes_to_the_same_confirmation(admin_client, queue):
    bid = arrive(queue)
    row = Batch.objects.get(bid=bid)
    response = admin_client.post(
        "/admin/batches/batch/",
        {"action": "confirm_batch_approve", "_selected_action": [row.pk]},
    )
    assert response.status_code == 302
    assert response.url == f"/actions/batch.approve/confirm?ids={bid}"
    listing = admin_client.get("/admin/batches/batch/").content.decode()
    assert "Awaiting approval" in listing


def test_releasing_a_collection_leaves_an_awaiting_batch_waiting(client, queue, people):
    bid = arrive(queue)
    client.force_login(people["administrator"])
    page = client.get("/actions/collection.release_all/confirm?ids=demo").content.decode()
    assert bid not in page
    confirm_and_execute(client, "collection.release_all", "ids=demo", reason="all go")
    assert queue.batches.get_batch(bid).awaiting_approval


def test_a_big_batchs_summary_is_shown_shortened_never_lost(client, queue, people, monkeypatch):
    from tests.core.test_preservation_approval_summary_fit import big_summary

    monkeypatch.setattr(arrival, "summarise", lambda data, **kw: big_summary())
    bid = arrive(queue)
    client.force_login(people["operator"])
    page = client.get(f"/batches/{bid}/").content.decode()
    assert "No pre-flight summary" not in page and "Shortened to fit beside the batch" in page
    assert "of the rows that update an object" in page and "490 more" in page
    assert "5,000" in page  # counts.updates, the full number, kept
