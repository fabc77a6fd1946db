"""Two-person deletion over the API (issue 36): ``POST /api/v1/deletions`` deletes at once,
or, with ``MQ_TWO_PERSON_DELETION`` on, answers 202 with the request; the requests are
listed, shown, approved, rejected and withdrawn with a bearer token, by the same rules as
the pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from batches.models import ApiToken
from steering.models import DeletionRequest
from tests.pages import test_steering_actions as base
from tests.pages.test_steering_pages import mirrored

queue, job_in = base.queue, base.job_in


@pytest.fixture
def keys(django_user_model, db):
    def make(name, group):
        user = django_user_model.objects.create_user(name, password="pw")
        user.groups.set(Group.objects.filter(name=group))
        return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(user, 'tests')[1]}"}

    return {
        "ada": make("ada", "administrator"),
        "bea": make("bea", "administrator"),
        "otto": make("otto", "operator"),
    }


def delete(client, who, *jids, reason="duplicates"):
    body = {"action": "job.delete", "ids": ",".join(jids), "reason": reason}
    return client.post("/api/v1/deletions", body, **who)


def test_without_the_setting_a_delete_acts_at_once(client, queue, keys):
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    done = delete(client, keys["ada"], jid)
    assert done.status_code == 200, done.content
    assert done.json()["done"] == 1 and done.json()["items"][0]["result"] == "done"
    assert queue.jobs.get_job(jid).status == "Deleted"


def test_an_operator_may_not_delete(client, queue, keys, settings):
    settings.MQ_TWO_PERSON_DELETION = ["jobs"]
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    refused = delete(client, keys["otto"], jid)
    assert refused.status_code == 403 and "administrator" in refused.json()["errors"][0]
    assert not DeletionRequest.objects.exists()


def test_a_request_then_a_second_administrator_approves(client, queue, keys, settings):
    settings.MQ_TWO_PERSON_DELETION = ["jobs"]
    jid, other = job_in(queue, "Failed"), job_in(queue, "Completed")
    mirrored(queue, jid, other)
    asked = delete(client, keys["ada"], jid, other)
    assert asked.status_code == 202, asked.content
    body = asked.json()
    assert body["state"] == "requested" and body["requested_by"] == "ada"
    assert [i["id"] for i in body["items"]] == [jid]
    assert body["refused"][0]["id"] == other and "Completed" in body["refused"][0]["why"]
    assert queue.jobs.get_job(jid).status == "Failed"
    pk = body["id"]
    listed = client.get("/api/v1/deletion-requests", **keys["bea"]).json()
    assert [r["id"] for r in listed["requests"]] == [pk]
    own = client.post(f"/api/v1/deletion-requests/{pk}/approve", {"reason": "x"}, **keys["ada"])
    assert own.status_code == 403 and "you requested it" in own.json()["errors"][0]
    noreason = client.post(f"/api/v1/deletion-requests/{pk}/approve", {}, **keys["bea"])
    assert noreason.status_code == 400
    ok = client.post(f"/api/v1/deletion-requests/{pk}/approve", {"reason": "ok"}, **keys["bea"])
    assert ok.status_code == 200, ok.content
    assert ok.json()["state"] == "approved" and ok.json()["decision"]["done"] == 1
    assert queue.jobs.get_job(jid).status == "Deleted"
    twice = client.post(f"/api/v1/deletion-requests/{pk}/approve", {"reason": "ok"}, **keys["bea"])
    assert twice.status_code == 409


def test_reject_and_withdraw(client, queue, keys, settings):
    settings.MQ_TWO_PERSON_DELETION = ["jobs"]
    one, two = job_in(queue, "Failed"), job_in(queue, "Failed")
    mirrored(queue, one, two)
    first = delete(client, keys["ada"], one).json()["id"]
    second = delete(client, keys["ada"], two).json()["id"]
    no = client.post(f"/api/v1/deletion-requests/{first}/reject", {"reason": "keep"}, **keys["bea"])
    assert no.status_code == 200 and no.json()["state"] == "rejected"
    not_hers = client.post(
        f"/api/v1/deletion-requests/{second}/withdraw", {"reason": "x"}, **keys["bea"]
    )
    assert not_hers.status_code == 403
    back = client.post(
        f"/api/v1/deletion-requests/{second}/withdraw", {"reason": "oops"}, **keys["ada"]
    )
    assert back.status_code == 200 and back.json()["state"] == "withdrawn"
    shown = client.get(f"/api/v1/deletion-requests/{second}", **keys["bea"]).json()
    assert shown["state"] == "withdrawn" and shown["items"][0]["id"] == two
    assert queue.jobs.get_job(one).status == "Failed" and queue.jobs.get_job(two).status == "Failed"


def test_no_token_no_requests(client, db):
    assert client.get("/api/v1/deletion-requests").status_code == 401


def test_a_request_of_another_collection_is_hidden_or_refused_by_scope(
    client, queue, keys, settings, django_user_model
):
    from door.rights import grant_depositor
    from steering.models import CollectionScope

    settings.MQ_TWO_PERSON_DELETION = ["jobs"]
    jid = job_in(queue, "Failed", collection="other")
    mirrored(queue, jid)
    pk = delete(client, keys["ada"], jid).json()["id"]
    dora = django_user_model.objects.create_user("dora", password="pw")
    grant_depositor(dora, ["demo"])
    dora_key = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(dora, 'tests')[1]}"}
    assert client.get("/api/v1/deletion-requests", **dora_key).json()["requests"] == []
    assert client.get(f"/api/v1/deletion-requests/{pk}", **dora_key).status_code == 404
    CollectionScope.objects.create(
        user=django_user_model.objects.get(username="bea"), collections=["demo"]
    )
    refused = client.post(f"/api/v1/deletion-requests/{pk}/approve", {"reason": "x"}, **keys["bea"])
    assert refused.status_code == 403
    assert "outside your collections" in refused.json()["errors"][0]
    assert queue.jobs.get_job(jid).status == "Failed"


def test_a_scoped_requesters_request_keeps_their_collections_for_the_run(
    client, queue, keys, settings
):
    from django.contrib.auth import get_user_model

    from steering.actions.execution import WITHIN_KEY
    from steering.models import CollectionScope

    settings.MQ_TWO_PERSON_DELETION = ["jobs"]
    ada = get_user_model().objects.get(username="ada")
    CollectionScope.objects.create(user=ada, collections=["demo"])
    jid = job_in(queue, "Failed")
    mirrored(queue, jid)
    assert delete(client, keys["ada"], jid).status_code == 202
    req = DeletionRequest.objects.get()
    assert req.params[WITHIN_KEY] == ["demo"] and req.collections == ["demo"]
    approved = client.post(
        f"/api/v1/deletion-requests/{req.pk}/approve", {"reason": "ok"}, **keys["bea"]
    )
    assert approved.status_code == 200, approved.content
    assert approved.json()["decision"]["done"] == 1 and queue.jobs.get_job(jid).status == "Deleted"
