"""Steering Merritt's access queue from the web: requeue, delete, clean up, pause and unpause,
each through the confirmation page with its reason, stale-version guard, role and collection
checks and audit; Merritt's own code (the replay) reads what we wrote."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from inventory.models import InventoryObject
from steering.models import AdminAction, CollectionScope, MaintenanceWindow
from steering.windows.scheduler import apply_windows
from tests.merrittzk_access import MerrittAccess
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import confirm_and_execute, payload_of

queue, people = base.queue, base.people

TOKEN = {
    "status": 201,
    "token": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
    "cloud-content-byte": 17079,
    "delivery-node": 7777,
}


@pytest.fixture
def merritt(queue) -> MerrittAccess:
    zk = MerrittAccess(queue.client)
    zk.init_nodes()
    return zk


def request_in(merritt: MerrittAccess, status: str, queue_name: str = "small", **token) -> str:
    """A request Merritt's access service made and moved to ``status``; its key."""
    qid = merritt.create_assembly(queue_name, {**TOKEN, **token})
    route = {
        "Pending": [],
        "Processing": ["Processing"],
        "Completed": ["Processing", "Completed"],
        "Failed": ["Processing", "Failed"],
        "Deleted": ["Processing", "Failed", "Deleted"],
    }[status]
    for step in route:
        merritt.set_status(queue_name, qid, step, "assembly broke" if step == "Failed" else "")
    return f"{queue_name}/{qid}"


def status_of(merritt: MerrittAccess, key: str) -> str:
    q, qid = key.split("/")
    return merritt.load(q, qid)[0]


def test_an_operator_requeues_a_failed_request_audited_and_merritt_reads_it_pending(
    client, merritt, people
):
    key = request_in(merritt, "Failed")
    client.force_login(people["operator"])
    page, done, data = confirm_and_execute(
        client, "access.requeue", f"ids={key}", reason="the storage node is back"
    )
    body = page.content.decode()
    assert key in body and 'name="reason"' in body and "assembles the object again" in body
    assert done.status_code == 302
    assert status_of(merritt, key) == "Pending"
    q, qid = key.split("/")
    assert merritt.acquire_pending_assembly(q) == qid, "Merritt's service takes it again"
    record = AdminAction.objects.get()
    assert (record.action, record.scope, record.username) == ("access.requeue", "access", "otto")
    item = record.items.get()
    assert (item.item_id, item.result, item.before_status, item.after_status) == (
        key,
        "done",
        "Failed",
        "Pending",
    )
    audit = client.get("/actions/?scope=access").content.decode()
    assert "Requeue (access)" in audit and "the storage node is back" in audit
    # The same confirmation again (a double click): nothing is done twice.
    again = client.post("/actions/access.requeue/execute", data)
    assert again.status_code == 409 and AdminAction.objects.count() == 1


def test_a_request_changed_after_the_page_was_shown_is_skipped_not_written(client, merritt, people):
    key = request_in(merritt, "Failed")
    client.force_login(people["operator"])
    page = client.get(f"/actions/access.requeue/confirm?ids={key}")
    q, qid = key.split("/")
    merritt.admin_requeue(q, qid)  # Merritt's admin tool was quicker
    merritt.set_status(q, qid, "Processing")
    merritt.set_status(q, qid, "Failed", "broke again")
    done = client.post(
        "/actions/access.requeue/execute", {"payload": payload_of(page), "reason": "retry"}
    )
    assert done.status_code == 302
    item = AdminAction.objects.get().items.get()
    assert item.result == "skipped" and "changed since the page was shown" in item.detail
    assert status_of(merritt, key) == "Failed"


def test_requeue_applies_to_failed_only_and_delete_to_failed_or_completed(client, merritt, people):
    pending = request_in(merritt, "Pending")
    completed = request_in(merritt, "Completed", "large")
    client.force_login(people["operator"])
    page = client.get(f"/actions/access.requeue/confirm?ids={pending},{completed}")
    body = page.content.decode()
    assert "it is Pending; requeue applies to Failed" in body
    assert "it is Completed; requeue applies to Failed" in body
    assert "applies to <strong>0</strong> of 2 items" in body
    _, done, _ = confirm_and_execute(client, "access.delete", f"ids={completed}", reason="stale")
    assert done.status_code == 302 and status_of(merritt, completed) == "Deleted"
    assert MerrittAccess(merritt.zk).list_jobs("large", "Deleted") == [completed.split("/")[1]]


def test_a_reason_is_required(client, merritt, people):
    key = request_in(merritt, "Failed")
    client.force_login(people["operator"])
    _, done, _ = confirm_and_execute(client, "access.requeue", f"ids={key}", reason="  ")
    assert done.status_code == 400 and "A reason is required." in done.content.decode()
    assert status_of(merritt, key) == "Failed" and not AdminAction.objects.exists()


def test_a_viewer_is_refused_and_nothing_is_written(client, merritt, people):
    key = request_in(merritt, "Failed")
    client.force_login(people["viewer"])
    refused = client.get(f"/actions/access.requeue/confirm?ids={key}")
    assert refused.status_code == 403 and "needs the operator role" in refused.content.decode()
    refused = client.get("/actions/access.pause/confirm?ids=small")
    assert refused.status_code == 403
    assert status_of(merritt, key) == "Failed" and not merritt.paused("small")


def test_the_collection_scope_applies_where_the_requests_object_belongs_to_one(
    client, merritt, people, django_user_model
):
    InventoryObject.objects.create(ark="ark:/13030/m5demo1", collection="demo")
    InventoryObject.objects.create(ark="ark:/13030/m5other", collection="other")
    mine = request_in(merritt, "Failed", ark="ark:/13030/m5demo1")
    theirs = request_in(merritt, "Failed", ark="ark:/13030/m5other")
    nobodys = request_in(merritt, "Failed")
    limited = django_user_model.objects.create_user("olga", password="pw")
    limited.groups.set(Group.objects.filter(name="operator"))
    CollectionScope.objects.create(user=limited, collections=["demo"])
    client.force_login(limited)
    body = client.get(
        f"/actions/access.requeue/confirm?ids={mine},{theirs},{nobodys}"
    ).content.decode()
    assert "collection other is outside your collections" in body
    assert "belongs to no collection this queue knows" in body
    _, done, _ = confirm_and_execute(
        client, "access.requeue", f"ids={mine},{theirs},{nobodys}", reason="mine only"
    )
    assert done.status_code == 302
    assert [status_of(merritt, k) for k in (mine, theirs, nobodys)] == [
        "Pending",
        "Failed",
        "Failed",
    ]
    refused = client.get("/actions/access.pause/confirm?ids=small").content.decode()
    assert "an access queue serves every collection" in refused


def test_pause_and_unpause_each_queue_with_merritts_own_lock(client, merritt, people):
    client.force_login(people["operator"])
    page, done, data = confirm_and_execute(
        client, "access.pause", "ids=small", reason="storage upgrade"
    )
    assert "starts no new assembly" in page.content.decode()
    assert done.status_code == 302 and merritt.paused("small") and not merritt.paused("large")
    assert merritt.zk.get("/locks/queue/accessSmall")[0] == b""
    assert client.post("/actions/access.pause/execute", data).status_code == 409
    refused = client.get("/actions/access.pause/confirm?ids=small").content.decode()
    assert "it is Paused; pause applies to Running" in refused
    key = request_in(merritt, "Completed")
    merritt.lock(*key.split("/"))
    held = client.get(f"/actions/access.delete/confirm?ids={key}").content.decode()
    assert "Merritt&#x27;s access service is assembling it (locked)" in held
    _, done, _ = confirm_and_execute(client, "access.unpause", "ids=small", reason="done")
    assert done.status_code == 302 and not merritt.paused("small")
    merritt.pause("large")  # the admin tool paused it
    _, done, _ = confirm_and_execute(client, "access.unpause", "ids=large", reason="go on")
    assert not merritt.paused("large")
    assert list(AdminAction.objects.values_list("action", flat=True).order_by("pk")) == [
        "access.pause",
        "access.unpause",
        "access.unpause",
    ]


def test_cleanup_removes_only_completed_and_deleted_requests_and_merritt_lists_none(
    client, merritt, people
):
    completed = request_in(merritt, "Completed")
    deleted = request_in(merritt, "Deleted", "large")
    failed = request_in(merritt, "Failed")
    client.force_login(people["operator"])
    ids = f"{completed},{deleted},{failed}"
    page, done, _ = confirm_and_execute(client, "access.cleanup", f"ids={ids}", reason="tidy")
    body = page.content.decode()
    assert "it is Failed; clean up applies to Completed, Deleted" in body
    assert done.status_code == 302
    assert merritt.list_jobs("small") == [failed.split("/")[1]]
    assert merritt.list_jobs("large") == []
    record = AdminAction.objects.get()
    assert sorted(record.items.values_list("item_id", "result")) == sorted(
        [(completed, "done"), (deleted, "done")]
    )


def test_a_maintenance_window_pauses_an_access_queue_and_unpauses_it_at_its_end(
    merritt, queue, django_user_model
):
    now = timezone.now()
    ada = django_user_model.objects.create_user("ada2", password="pw")
    w = MaintenanceWindow.objects.create(
        scope=MaintenanceWindow.ACCESS_LARGE,
        start=now - timedelta(minutes=1),
        end=now + timedelta(hours=1),
        reason="large node upgrade",
        created_by=ada,
        created_by_name="ada2",
    )
    assert w.target == "large access queue"
    apply_windows(queue, now)
    assert merritt.paused("large") and not merritt.paused("small")
    apply_windows(queue, now + timedelta(hours=2))
    assert not merritt.paused("large")
    started = AdminAction.objects.get(action="window.start").items.get()
    assert started.item_id == "large" and "paused the large access queue" in started.detail
    ended = AdminAction.objects.get(action="window.end").items.get()
    assert "resumed the large access queue" in ended.detail


def test_unpausing_during_a_window_warns_that_the_window_puts_the_pause_back(
    client, merritt, queue, people
):
    now = timezone.now()
    MaintenanceWindow.objects.create(
        scope=MaintenanceWindow.ACCESS_SMALL,
        start=now - timedelta(minutes=1),
        end=now + timedelta(hours=1),
        reason="node upgrade",
        created_by_name="ada",
    )
    apply_windows(queue, now)
    client.force_login(people["operator"])
    body = client.get("/actions/access.unpause/confirm?ids=small").content.decode()
    assert "the window puts the hold back at its next check" in body


def test_cleanup_from_the_lists_link_takes_the_finished_requests_of_that_age(
    client, merritt, queue, people
):
    from mirror import access as mirrored

    completed = request_in(merritt, "Completed")
    failed = request_in(merritt, "Failed")
    mirrored.refresh(queue.client)
    client.force_login(people["operator"])
    listing = client.get("/access/").content.decode()
    link = "/actions/access.cleanup/confirm?all=1&amp;status=Completed&amp;status=Deleted"
    assert link + "&amp;older_than=7" in listing
    young = client.get(
        "/actions/access.cleanup/confirm?all=1&status=Completed&status=Deleted&older_than=7"
    ).content.decode()
    assert "applies to <strong>0</strong>" in young
    page, done, _ = confirm_and_execute(
        client,
        "access.cleanup",
        "all=1&status=Completed&status=Deleted&older_than=0",
        reason="tidy",
    )
    assert completed in page.content.decode() and failed not in page.content.decode()
    assert done.status_code == 302 and merritt.list_jobs("small") == [failed.split("/")[1]]
    record = AdminAction.objects.get()
    assert record.selection and [i.item_id for i in record.items.all()] == [completed]


def test_an_administrator_schedules_a_window_that_pauses_the_small_access_queue(
    client, people, django_user_model
):
    from tests.pages.test_windows_pages import form, schedule

    client.force_login(people["administrator"])
    assert "the small access queue (pause)" in client.get("/windows/schedule").content.decode()
    page, data = schedule(client, scope="access-small", collection="ignored")
    assert "The small access queue is paused" in page.content.decode()
    assert client.post("/windows/schedule", data).status_code == 302
    w = MaintenanceWindow.objects.get()
    assert (w.scope, w.collection, w.target) == ("access-small", "", "small access queue")
    assert "small access queue" in client.get("/windows/").content.decode()
    limited = django_user_model.objects.create_user("adele", password="pw")
    limited.groups.set(Group.objects.filter(name="administrator"))
    CollectionScope.objects.create(user=limited, collections=["demo"])
    client.force_login(limited)
    refused = client.post("/windows/schedule", form(scope="access-large"))
    assert refused.status_code == 403
    assert "pausing an access queue needs an administrator of every collection" in (
        refused.content.decode()
    )
