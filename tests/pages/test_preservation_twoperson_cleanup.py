"""Two-person purging (issue 36): with ``MQ_TWO_PERSON_DELETION`` covering purge, a real
cleanup confirmed after its dry run becomes a request listing the dry run's nodes and
folders; approved by a second administrator, it removes only those, never what became old
enough since."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from steering.models import AdminAction, DeletionRequest
from tests.pages import test_steering_actions as base
from tests.pages.test_preservation_twoperson import PAYLOAD
from tests.pages.test_steering_maintenance import start, started

queue, people, admin_queue, job_in, work = (
    base.queue,
    base.people,
    base.admin_queue,
    base.job_in,
    base.work,
)


@pytest.fixture
def bea(django_user_model, db):
    user = django_user_model.objects.create_user("bea", password="pw")
    user.groups.set(Group.objects.filter(name="administrator"))
    return user


def test_a_real_cleanup_is_requested_and_removes_only_what_its_dry_run_listed(
    client, queue, people, admin_queue, settings, bea
):
    settings.MQ_TWO_PERSON_DELETION = ["purge"]
    gone, kept = job_in(queue, "Deleted"), job_in(queue, "Failed")
    client.force_login(people["administrator"])
    started(client, "cleanup", "older_than=0s&mode=dry", reason="look first")
    work(admin_queue)
    confirm = client.get("/maintenance/cleanup/confirm?older_than=0s&mode=real").content.decode()
    assert "second administrator" in confirm
    done, data = start(client, "cleanup", "older_than=0s&mode=real", reason="disk is full")
    req = DeletionRequest.objects.get()
    assert done.status_code == 302 and done.url == f"/deletion-requests/{req.pk}/"
    assert req.kind == "purge" and req.action == "cleanup" and req.state == "requested"
    assert not AdminAction.objects.filter(action="cleanup", params__dry_run=False).exists()
    assert gone in queue.jobs.list_job_ids()
    again = client.post("/maintenance/cleanup/start", data)  # a double click
    assert again.url == done.url and DeletionRequest.objects.count() == 1

    later = job_in(queue, "Deleted")  # old enough for "0s", but not in the dry run
    client.force_login(bea)
    page = client.get(f"/deletion-requests/{req.pk}/").content.decode()
    assert gone in page and later not in page
    payload = PAYLOAD.search(page).group(1)
    approved = client.post(
        f"/deletion-requests/{req.pk}/approve", {"payload": payload, "reason": "agreed"}
    )
    req.refresh_from_db()
    run = req.decision_record
    assert approved.status_code == 302 and approved.url == f"/actions/{run.pk}/"
    assert run.action == "cleanup" and run.username == "bea"
    assert run.params["deletion_request"] == req.pk
    work(admin_queue)
    run.refresh_from_db()
    ids = queue.jobs.list_job_ids()
    assert gone not in ids and kept in ids and later in ids
    assert run.finished and run.report["counts"]["jobs"] == 1


def test_an_approved_cleanup_is_queued_only_once_its_record_is_committed(
    client, queue, people, admin_queue, settings, bea, monkeypatch
):
    from django.db import connection

    from steering import tasks
    from steering.twoperson import requests as life

    settings.MQ_TWO_PERSON_DELETION = ["purge"]
    job_in(queue, "Deleted")
    client.force_login(people["administrator"])
    started(client, "cleanup", "older_than=0s&mode=dry", reason="look first")
    work(admin_queue)
    start(client, "cleanup", "older_than=0s&mode=real", reason="disk is full")
    req = DeletionRequest.objects.get()
    outer = len(connection.savepoint_ids)  # the test's own transaction
    seen = []
    enqueue = tasks.enqueue

    def spy(record, *args, **kwargs):
        # An idle worker may take the job at once: the record must be committed by then.
        seen.append(len(connection.savepoint_ids))
        return enqueue(record, *args, **kwargs)

    monkeypatch.setattr(tasks, "enqueue", spy)
    run = life.approve(req, bea, "agreed")
    assert seen == [outer]
    work(admin_queue)
    run.refresh_from_db()
    assert run.finished and run.report["counts"]["jobs"] == 1
