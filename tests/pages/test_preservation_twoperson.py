"""Two-person deletion (issue 36): with ``MQ_TWO_PERSON_DELETION`` on, deleting jobs or a
batch, or purging, is requested by one administrator and approved (or rejected) by another;
the request shows what will go, each half is audited, a stale item is skipped, not deleted."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.utils import timezone

from merritt_queue.core.errors import NotFound
from steering.models import AdminAction, CollectionScope, DeletionRequest
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_confirmations import held_batch_with_jobs
from tests.pages.test_steering_pages import confirm_and_execute, mirrored

queue, people, job_in = base.queue, base.people, base.job_in
PAYLOAD = re.compile(r'name="payload" value="([^"]+)"')


@pytest.fixture
def two(settings):
    settings.MQ_TWO_PERSON_DELETION = ["batch", "jobs", "purge"]
    settings.MQ_TWO_PERSON_EXPIRY_HOURS = 72


@pytest.fixture
def bea(django_user_model, db):
    user = django_user_model.objects.create_user("bea", password="pw")
    user.groups.set(Group.objects.filter(name="administrator"))
    return user


def requested(client, queue, people, *jids, reason="duplicates of 12"):
    client.force_login(people["administrator"])
    page, done, data = confirm_and_execute(client, "job.delete", f"ids={','.join(jids)}", reason)
    assert "second administrator" in page.content.decode()
    return page, done, data


def decide(client, pk, verb, reason="checked the list"):
    page = client.get(f"/deletion-requests/{pk}/")
    assert page.status_code == 200, page.content
    payload = PAYLOAD.search(page.content.decode()).group(1)
    return client.post(f"/deletion-requests/{pk}/{verb}", {"payload": payload, "reason": reason})


def test_off_by_default_a_delete_acts_at_once(client, queue, people):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    client.force_login(people["administrator"])
    confirm_and_execute(client, "job.delete", f"ids={jid}")
    assert queue.jobs.get_job(jid).status == "Deleted"
    assert not DeletionRequest.objects.exists()


def test_a_delete_becomes_a_request_once_and_deletes_nothing(client, queue, people, two):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    _, done, data = requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    assert done.status_code == 302 and done.url == f"/deletion-requests/{req.pk}/"
    assert req.state == "requested" and req.requester == people["administrator"]
    assert req.action == "job.delete" and req.items == [[jid, req.items[0][1]]]
    assert queue.jobs.get_job(jid).status == "Failed"
    again = client.post("/actions/job.delete/execute", data)  # a double click
    assert again.status_code == 302 and again.url == done.url
    assert DeletionRequest.objects.count() == 1
    half = req.request_record
    assert half.action == "deletion.request" and half.username == "ada"
    assert half.reason == "duplicates of 12" and half.params["request"] == req.pk
    assert list(half.items.values_list("item_id", flat=True)) == [jid]


def test_the_requester_cannot_approve_their_own_request(client, queue, people, two):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    page = client.get(f"/deletion-requests/{req.pk}/").content.decode()
    assert "you requested it" in page
    refused = client.post(f"/deletion-requests/{req.pk}/approve", {"reason": "x", "payload": "x"})
    assert refused.status_code in (400, 403)
    assert DeletionRequest.objects.get().state == "requested"
    assert queue.jobs.get_job(jid).status == "Failed"


def test_a_second_administrator_approves_and_the_job_goes_audited_both_halves(
    client, queue, people, two, bea
):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    client.force_login(bea)
    listing = client.get("/deletion-requests/").content.decode()
    assert f"/deletion-requests/{req.pk}/" in listing and "duplicates of 12" in listing
    shown = client.get(f"/deletion-requests/{req.pk}/").content.decode()
    assert jid in shown and "Failed" in shown
    done = decide(client, req.pk, "approve", "agreed")
    req.refresh_from_db()
    assert done.status_code == 302, done.content
    assert req.state == "approved" and req.approver == bea and req.decision_reason == "agreed"
    assert queue.jobs.get_job(jid).status == "Deleted"
    run = req.decision_record
    assert run.action == "job.delete" and run.username == "bea" and run.done == 1
    assert run.params["deletion_request"] == req.pk
    assert run.params["request_record"] == req.request_record.pk
    assert done.url == f"/actions/{run.pk}/"
    page = client.get(f"/deletion-requests/{req.pk}/").content.decode()
    assert "approved by bea" in page and 'name="payload"' not in page
    again = client.post(f"/deletion-requests/{req.pk}/approve", {"payload": "x", "reason": "y"})
    assert again.status_code == 409 and "was approved by bea" in again.content.decode()
    assert AdminAction.objects.filter(action="job.delete").count() == 1


def test_a_double_click_on_approve_acts_once(client, queue, people, two, bea):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    client.force_login(bea)
    page = client.get(f"/deletion-requests/{req.pk}/").content.decode()
    data = {"payload": PAYLOAD.search(page).group(1), "reason": "agreed"}
    first = client.post(f"/deletion-requests/{req.pk}/approve", data)
    second = client.post(f"/deletion-requests/{req.pk}/approve", data)
    assert first.status_code == 302 and second.status_code == 302 and first.url == second.url
    assert AdminAction.objects.filter(action="job.delete").count() == 1


def test_an_item_changed_since_the_request_is_skipped_not_deleted(client, queue, people, two, bea):
    stale, kept = job_in(queue, "Failed"), job_in(queue, "Failed")
    mirrored(queue, stale, kept)
    requested(client, queue, people, stale, kept)
    req = DeletionRequest.objects.get()
    queue.moves.transition_job(stale, "Pending", "resumed by otto")
    queue.moves.transition_job(stale, "Failed", "failed again")
    mirrored(queue, stale)
    client.force_login(bea)
    page = client.get(f"/deletion-requests/{req.pk}/").content.decode()
    assert "changed since the request" in page
    decide(client, req.pk, "approve", "agreed")
    req.refresh_from_db()
    assert queue.jobs.get_job(stale).status == "Failed"
    assert queue.jobs.get_job(kept).status == "Deleted"
    items = {i.item_id: i for i in req.decision_record.items.all()}
    assert items[stale].result == "skipped" and items[kept].result == "done"


def test_a_rejection_deletes_nothing_and_is_audited(client, queue, people, two, bea):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    client.force_login(bea)
    empty = decide(client, req.pk, "reject", "")
    assert empty.status_code == 400 and "reason is required" in empty.content.decode()
    decide(client, req.pk, "reject", "they are still needed")
    req.refresh_from_db()
    assert req.state == "rejected" and req.approver == bea
    assert req.decision_record.action == "deletion.reject"
    assert req.decision_record.params["request_record"] == req.request_record.pk
    assert queue.jobs.get_job(jid).status == "Failed"


def test_the_requester_withdraws_and_no_one_approves_after(client, queue, people, two, bea):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    decide(client, req.pk, "withdraw", "asked the wrong list")
    req.refresh_from_db()
    assert req.state == "withdrawn"
    client.force_login(bea)
    late = client.post(f"/deletion-requests/{req.pk}/approve", {"payload": "x", "reason": "x"})
    assert late.status_code in (400, 409)
    assert queue.jobs.get_job(jid).status == "Failed"


def test_an_old_request_expires_and_cannot_be_approved(client, queue, people, two, bea):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    DeletionRequest.objects.filter(pk=req.pk).update(created=timezone.now() - timedelta(days=4))
    client.force_login(bea)
    page = client.get(f"/deletion-requests/{req.pk}/").content.decode()
    assert "expired" in page
    req.refresh_from_db()
    assert req.state == "expired"
    assert queue.jobs.get_job(jid).status == "Failed"


def test_an_approver_outside_a_collection_is_refused(client, queue, people, two, bea):
    jid = job_in(queue, "Failed", collection="other")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    CollectionScope.objects.create(user=bea, collections=["demo"])
    client.force_login(bea)
    refused = client.post(f"/deletion-requests/{req.pk}/approve", {"payload": "x", "reason": "y"})
    assert refused.status_code == 403
    assert "outside your collections" in refused.content.decode()
    assert queue.jobs.get_job(jid).status == "Failed"


def test_an_operator_cannot_approve(client, queue, people, two):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    client.force_login(people["operator"])
    refused = client.post(f"/deletion-requests/{req.pk}/approve", {"payload": "x", "reason": "y"})
    assert refused.status_code == 403 and "administrator" in refused.content.decode()


def test_a_batch_request_shows_the_jobs_that_go_with_it(client, queue, people, two, bea):
    bid, one, other = held_batch_with_jobs(queue)
    client.force_login(people["administrator"])
    confirm_and_execute(client, "batch.delete", f"ids={bid}")
    req = DeletionRequest.objects.get()
    assert req.kind == "batch"
    client.force_login(bea)
    page = client.get(f"/deletion-requests/{req.pk}/").content.decode()
    assert bid in page and one in page and other in page
    decide(client, req.pk, "approve", "agreed")
    assert queue.batches.get_batch(bid).status == "Deleted"


def test_the_dashboard_counts_waiting_requests(client, queue, people, two, bea):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    client.force_login(bea)
    home = client.get("/").content.decode()
    assert 'href="/deletion-requests/"' in home
    assert re.search(r"1</strong> deletion request", home)


def test_the_command_lists_shows_approves(client, queue, people, two, bea, capsys):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    call_command("deletion_requests", "list")
    assert f"{req.pk}" in capsys.readouterr().out
    call_command("deletion_requests", "show", str(req.pk))
    assert jid in capsys.readouterr().out
    with pytest.raises(CommandError, match="requested it"):
        call_command("deletion_requests", "approve", str(req.pk), "--as", "ada", "--reason", "x")
    with pytest.raises(CommandError, match="reason"):
        call_command("deletion_requests", "approve", str(req.pk), "--as", "bea")
    call_command("deletion_requests", "approve", str(req.pk), "--as", "bea", "--reason", "ok")
    assert queue.jobs.get_job(jid).status == "Deleted"
    assert DeletionRequest.objects.get().state == "approved"


def test_a_purge_now_is_requested_too(client, queue, people, two, bea):
    bid, one, other = held_batch_with_jobs(queue)
    queue.moves.transition_job(one, "Deleted", "")
    queue.moves.transition_job(other, "Deleted", "")
    queue.batch_moves.transition_batch(queue.batches.get_batch(bid), "Deleted", "")
    from tests.pages.test_steering_confirmations import batch_mirrored

    batch_mirrored(queue, bid)
    client.force_login(people["administrator"])
    confirm_and_execute(client, "batch.purge", f"ids={bid}")
    req = DeletionRequest.objects.get()
    assert req.kind == "purge"
    queue.batches.get_batch(bid)  # still there
    client.force_login(bea)
    decide(client, req.pk, "approve", "agreed")
    with pytest.raises(NotFound):
        queue.batches.get_batch(bid)


def test_the_django_admin_lists_requests_and_sends_to_their_page(client, queue, people, two, bea):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    bea.is_staff = True
    bea.save()
    client.force_login(bea)
    listing = client.get("/admin/steering/deletionrequest/")
    assert listing.status_code == 200 and "job.delete" in listing.content.decode()
    chosen = client.post(
        "/admin/steering/deletionrequest/",
        {"action": "approve_request", "_selected_action": [req.pk]},
    )
    assert chosen.status_code == 302 and chosen.url == f"/deletion-requests/{req.pk}/"
    assert client.post(f"/admin/steering/deletionrequest/{req.pk}/delete/").status_code == 403
    assert queue.jobs.get_job(jid).status == "Failed"


def test_the_audit_trail_names_both_halves_in_words(client, queue, people, two, bea):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    client.force_login(bea)
    decide(client, req.pk, "reject", "still needed")
    audit = client.get(f"/actions/?job={jid}").content.decode()
    assert "Request a deletion" in audit and "Reject a deletion request" in audit
    request_page = client.get(f"/actions/{req.request_record.pk}/").content.decode()
    assert jid in request_page and "duplicates of 12" in request_page


def test_an_all_matching_request_keeps_its_filter_and_skips_what_changed(
    client, queue, people, two, bea, settings
):
    settings.MQ_BULK_LIST_MAX = 1  # so the selection is summarised, not listed
    jids = [job_in(queue, "Failed", collection="wide") for _ in range(3)]
    mirrored(queue, *jids)
    client.force_login(people["administrator"])
    confirm_and_execute(client, "job.delete", "all=1&collection=wide&status=Failed", "wide ones")
    req = DeletionRequest.objects.get()
    assert req.items == [] and req.count == 3 and "collection=wide" in req.selection
    assert req.collections == ["wide"] and "as_of" in req.params
    queue.moves.transition_job(jids[0], "Pending", "resumed by otto")  # changed since
    mirrored(queue, jids[0])
    client.force_login(bea)
    page = client.get(f"/deletion-requests/{req.pk}/").content.decode()
    assert "wide" in page and "Failed" in page
    decide(client, req.pk, "approve", "agreed")
    req.refresh_from_db()
    assert [queue.jobs.get_job(j).status for j in jids] == ["Pending", "Deleted", "Deleted"]
    assert req.decision_record.done == 2


def test_a_scoped_requesters_all_matching_request_deletes_only_in_their_collections(
    client, queue, people, two, bea, settings
):
    settings.MQ_BULK_LIST_MAX = 1
    mine = [job_in(queue, "Failed", collection="alpha") for _ in range(2)]
    other = [job_in(queue, "Failed", collection="beta") for _ in range(2)]
    mirrored(queue, *mine, *other)
    ada = people["administrator"]
    CollectionScope.objects.create(user=ada, collections=["alpha"])
    client.force_login(ada)
    confirm_and_execute(client, "job.delete", "all=1&status=Failed", "alpha's failures")
    req = DeletionRequest.objects.get()
    assert req.count == 2 and req.collections == ["alpha"]
    assert {c for c, _, _ in req.shown["by"]} == {"alpha"}
    client.force_login(bea)  # an administrator of every collection
    decide(client, req.pk, "approve", "agreed")
    req.refresh_from_db()
    assert req.decision_record.done == 2
    assert [queue.jobs.get_job(j).status for j in mine] == ["Deleted", "Deleted"]
    assert [queue.jobs.get_job(j).status for j in other] == ["Failed", "Failed"]


def test_a_request_names_the_collection_of_a_row_that_names_only_its_profile(
    client, queue, people, two, settings, django_user_model
):
    from batches.models import Profile
    from jobs.models import Job

    settings.MQ_BULK_LIST_MAX = 1
    Profile.objects.create(name="alpha_p", collection="alpha", minter_shoulder="ark:/99999/fk4")
    jids = [job_in(queue, "Failed", collection="alpha") for _ in range(2)]
    mirrored(queue, *jids)
    Job.objects.filter(jid__in=jids).update(collection="", profile="alpha_p")  # as Merritt wrote
    client.force_login(people["administrator"])
    confirm_and_execute(client, "job.delete", "all=1&status=Failed", "old ones")
    req = DeletionRequest.objects.get()
    assert req.collections == ["alpha"]
    depositor = django_user_model.objects.create_user("dora", password="pw")
    depositor.groups.add(Group.objects.get_or_create(name="depositor")[0])
    CollectionScope.objects.create(user=depositor, collections=["gamma"])
    client.force_login(depositor)
    assert client.get(f"/deletion-requests/{req.pk}/").status_code == 404


def test_a_request_naming_no_collection_is_read_by_readers_of_every_collection_only(
    client, queue, people, two, django_user_model
):
    jid = job_in(queue, "Failed", collection="")
    mirrored(queue, jid)
    requested(client, queue, people, jid)
    req = DeletionRequest.objects.get()
    assert req.collections == []
    depositor = django_user_model.objects.create_user("dora", password="pw")
    depositor.groups.add(Group.objects.get_or_create(name="depositor")[0])
    CollectionScope.objects.create(user=depositor, collections=["gamma"])
    client.force_login(depositor)
    assert client.get(f"/deletion-requests/{req.pk}/").status_code == 404
    assert f"/deletion-requests/{req.pk}/" not in client.get("/deletion-requests/").content.decode()
    scoped = django_user_model.objects.create_user("abe", password="pw")
    scoped.groups.set(Group.objects.filter(name="administrator"))
    CollectionScope.objects.create(user=scoped, collections=["demo"])
    client.force_login(scoped)
    refused = client.post(f"/deletion-requests/{req.pk}/approve", {"payload": "x", "reason": "y"})
    assert refused.status_code == 403 and "no collection known" in refused.content.decode()
    assert queue.jobs.get_job(jid).status == "Failed"


def test_two_submits_of_one_confirmation_at_once_make_one_request(queue, people, two, monkeypatch):
    from django.db.models import QuerySet

    from steering.twoperson import requests as life

    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    ada = people["administrator"]
    first, new = life.create(ada, "job.delete", "dup", token="t1", items=[[jid, 1]])
    assert new
    # The second submit checked before the first inserted: it finds no request by its token.
    monkeypatch.setattr(QuerySet, "first", lambda self: None)
    second, new = life.create(ada, "job.delete", "dup", token="t1", items=[[jid, 1]])
    assert not new and second.pk == first.pk
    assert DeletionRequest.objects.count() == 1
