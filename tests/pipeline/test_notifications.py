"""Depositors' subscriptions: events from the mirror's timeline, signed webhook deliveries to a
real receiver on 127.0.0.1, retries, the SSRF guard, e-mail, resend and the door's checks."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core import mail
from django.db import connection
from rq import Queue, SimpleWorker

from batches.models import ApiToken, Profile
from door.rights import grant_depositor
from door.submission import SubmissionError, prepare
from jobs.models import JobEvent
from merritt_queue.core.queues import NOTIFY_QUEUE
from merritt_queue.services import webhook
from mirror import events as mirror_events
from mirror import facade as mirror
from notifications import outbox, tasks
from notifications.models import (
    ALL,
    COMPLETION,
    DELIVERED,
    EMAIL,
    FAILED,
    FAILURES,
    PENDING,
    WEBHOOK,
    Delivery,
    Subscription,
)
from steering.models import AdminAction, AdminActionItem
from tests.httpserver import Reply

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

AT = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def row(kind: str, item: str, version: int, status: str, bid: str = "bid0000000001") -> dict:
    out = {"bid": bid, "from_status": "", "to_status": status, "at": AT, "message": ""}
    out["status_version"] = version
    if kind == "job":
        out["jid"] = item
    return out


def receiver(http_server, secrets: dict[str, str] | None = None, *, fail_first: int = 0):
    """A receiver that verifies every signature (as docs/usage.md says) with the secret of the
    subscription the delivery names (from ``secrets``, filled by the test, or else from the
    database) and fails the first ``fail_first`` requests with a 500; ``seen`` lists
    (delivery id, event, verified)."""
    seen: list[tuple[str, dict, bool]] = []

    def handler(rec) -> Reply:
        named = rec.headers["x-merritt-queue-subscription"]
        ok = webhook.verify(secret_of(named, secrets), named, rec.headers, rec.body)
        body = json.loads(rec.body)
        assert str(body["subscription"]["id"]) == named
        assert body["delivery_id"] == rec.headers["x-merritt-queue-delivery"]
        seen.append((body["delivery_id"], body["event"], ok))
        if len(seen) <= fail_first:
            return Reply(500, b"receiver down for a moment")
        return Reply(200 if ok else 401, b"thanks")

    return http_server.behave("/events", handler=handler), seen


def secret_of(subscription_id: str, secrets: dict[str, str] | None) -> str:
    """A subscription's secret, read in the receiver's own thread (and connection)."""
    if secrets is not None:
        return secrets.get(subscription_id, "")
    try:
        return Subscription.objects.get(pk=int(subscription_id)).secret
    finally:
        connection.close()


def deliver_all(timeout: float = 30) -> None:
    """What the dispatcher's sweep and the mq-notify workers do, until nothing is due."""
    from django_rq import get_connection

    queue = Queue(NOTIFY_QUEUE, connection=get_connection("default"))
    deadline = time.monotonic() + timeout
    while Delivery.objects.filter(status=PENDING).exists():
        assert time.monotonic() < deadline, list(Delivery.objects.values("event_id", "status"))
        tasks.sweep()
        SimpleWorker([queue], connection=queue.connection).work(burst=True, logging_level="WARNING")


# --- the whole path: a real batch, a real receiver ------------------------------------------


def test_a_batch_s_events_reach_a_receiver_that_verifies_them_after_it_failed_once(
    pipeline, content, settings, admin_client
):
    settings.MQ_NOTIFY_BACKOFF = 0  # the retry is due at once: the test does not wait
    url, seen = receiver(content, fail_first=1)
    bid = pipeline.submit(
        type="file",
        payload_url=f"{content.url}/call911.jpg",
        batchID="notified",
        notify_url=url,
        notify_events="all",
    )
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    deliver_all()

    deliveries = list(Delivery.objects.all())
    assert {d.status for d in deliveries} == {DELIVERED}
    assert all(ok for _, _, ok in seen)
    # Every state entry of the batch and of its job, once each.
    statuses = [(e["kind"], e["status"]) for _, e, _ in seen]
    assert ("batch", "Pending") in statuses and ("batch", "Completed") in statuses
    assert ("job", "Notify") in statuses and ("job", "Completed") in statuses
    assert len({d.event_id for d in deliveries}) == len(deliveries)
    # The one that met the failure was retried with the same delivery id.
    first_id = seen[0][0]
    assert [s[0] for s in seen].count(first_id) == 2
    retried = Delivery.objects.get(delivery_id=first_id)
    assert retried.attempts == 2 and retried.last_status == 200
    assert [(a.ok, a.http_status) for a in retried.tries.all()] == [(False, 500), (True, 200)]
    assert len(seen) == len(deliveries) + 1
    page = admin_client.get(f"/batches/{bid}/").content.decode()
    assert 'id="notifications"' in page and str(first_id) in page and "Resend" in page

    # A rebuild of the mirror writes every timeline row again: no delivery is made twice.
    JobEvent.objects.all().delete()
    mirror.full_reconcile(pipeline.store)
    assert Delivery.objects.count() == len(deliveries)


def test_a_failing_job_reaches_the_depositor_when_it_fails(pipeline, content, settings):
    settings.MQ_NOTIFY_MAIL_GATHER = 0
    url, seen = receiver(content)
    bid = pipeline.submit(
        type="file",
        payload_url=f"{content.url}/no-such-file.jpg",
        notify_url=url,
        notify_events="failures",
        notify_emails="librarian@example.org",
    )
    pipeline.run(bid)
    deliver_all()
    assert [(e["kind"], e["status"]) for _, e, _ in seen] == [
        ("job", "Failed"),
        ("batch", "Failed"),
    ]
    assert all(ok for _, _, ok in seen)
    assert len(mail.outbox) >= 1
    assert any("Failed" in m.body and m.to == ["librarian@example.org"] for m in mail.outbox)


# --- the outbox -------------------------------------------------------------------------------


def subscribe(bid="bid0000000001", channel=WEBHOOK, events=ALL, target="http://127.0.0.1:9/x"):
    return Subscription.objects.create(
        bid=bid, channel=channel, target=target, events=events, profile="demo"
    )


@pytest.fixture
def profile(db):
    return Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")


def test_the_same_timeline_row_twice_makes_one_delivery(profile):
    subscribe()
    rows = [row("job", "jid0000000001", 3, "Failed")]
    mirror_events.write(mirror_events.JOB_EVENTS, [r | {"retry_count": 0} for r in rows])
    outbox.record("job", rows)  # the follower sees it again
    delivery = Delivery.objects.get()
    assert delivery.event_id == "job:jid0000000001:3" and delivery.status == PENDING


def test_each_filter_takes_its_events(profile):
    failures = subscribe(events=FAILURES)
    completion = subscribe(events=COMPLETION)
    every = subscribe(events=ALL)
    mailed = subscribe(channel=EMAIL, events=ALL, target="a@example.org")
    outbox.record("job", [row("job", "jid1", 2, "Processing"), row("job", "jid1", 3, "Failed")])
    outbox.record("batch", [row("batch", "", 4, "Reporting"), row("batch", "", 5, "Completed")])

    def got(s):
        return sorted(Delivery.objects.filter(subscription=s).values_list("event_id", flat=True))

    batch_done = "batch:bid0000000001:5"
    assert got(failures) == ["job:jid1:3"]
    assert got(completion) == [batch_done]
    assert len(got(every)) == 4
    assert got(mailed) == [batch_done, "job:jid1:3"]  # e-mail: failures and completion only


def test_a_batch_nobody_subscribed_to_costs_one_query(profile, django_assert_num_queries):
    subscribe(bid="bid0000000002")
    with django_assert_num_queries(1):
        outbox.record("job", [row("job", "jid1", 3, "Failed")])
    assert not Delivery.objects.exists()


# --- attempts -----------------------------------------------------------------------------------


def test_an_address_the_ssrf_guard_refuses_fails_at_once(profile, settings, http_server):
    settings.MQ_ALLOW_LOOPBACK = False
    subscribe(target=http_server.behave("/events", body=b"ok"))
    outbox.record("job", [row("job", "jid1", 3, "Failed")])
    delivery = Delivery.objects.get()
    assert tasks.attempt(delivery.pk) == FAILED
    delivery.refresh_from_db()
    assert delivery.attempts == 1 and delivery.next_attempt is None
    assert "loopback" in delivery.last_response
    assert http_server.requests == []
    assert tasks.attempt(delivery.pk) == "not due"  # not retried forever


def test_a_receiver_that_keeps_failing_is_given_up_after_the_last_attempt(
    profile, settings, http_server
):
    settings.MQ_ALLOW_LOOPBACK = True
    settings.MQ_NOTIFY_ATTEMPTS = 3
    settings.MQ_NOTIFY_BACKOFF = 0
    subscribe(target=http_server.behave("/events", status=503))
    outbox.record("job", [row("job", "jid1", 3, "Failed")])
    delivery = Delivery.objects.get()
    assert [tasks.attempt(delivery.pk) for _ in range(4)] == [PENDING, PENDING, FAILED, "not due"]
    assert len(http_server.requests_for("/events")) == 3
    ids = {r.headers["x-merritt-queue-delivery"] for r in http_server.requests_for("/events")}
    assert ids == {str(delivery.delivery_id)}


def test_backoff_doubles_up_to_its_cap(settings):
    settings.MQ_NOTIFY_BACKOFF, settings.MQ_NOTIFY_BACKOFF_MAX = 30, 100
    assert [tasks.backoff(n).total_seconds() for n in (1, 2, 3, 4)] == [30, 60, 100, 100]


def test_a_burst_of_failures_is_one_e_mail(profile, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.MQ_NOTIFY_MAIL_GATHER = 0
    subscribe(channel=EMAIL, events=FAILURES, target="a@example.org, b@example.org")
    outbox.record("job", [row("job", f"jid{i}", 3, "Failed") for i in range(3)])
    first = Delivery.objects.order_by("pk").first()
    assert tasks.attempt(first.pk) == DELIVERED
    assert set(Delivery.objects.values_list("status", flat=True)) == {DELIVERED}
    [message] = mail.outbox
    assert message.to == ["a@example.org", "b@example.org"]
    assert message.subject == "Batch bid0000000001: 3 events"
    assert "job jid2 Failed" in message.body


# --- resend -------------------------------------------------------------------------------


@pytest.fixture
def operator(db):
    user = get_user_model().objects.create_user("otto", password="pw")
    user.groups.add(Group.objects.get(name="operator"))
    return user


def test_an_operator_resends_once_with_a_reason_and_an_audit_record(
    profile, operator, client, settings, http_server
):
    settings.MQ_ALLOW_LOOPBACK = True
    secrets: dict[str, str] = {}
    seen_url, seen = receiver(http_server, secrets)
    subscription = subscribe(target=seen_url)
    secrets[str(subscription.pk)] = subscription.secret
    outbox.record("job", [row("job", "jid1", 3, "Failed")])
    delivery = Delivery.objects.get()
    assert tasks.attempt(delivery.pk) == DELIVERED
    client.force_login(operator)
    page = client.get(f"/notifications/deliveries/{delivery.pk}/resend/")
    assert page.status_code == 200 and str(delivery.delivery_id) in page.content.decode()
    payload = page.context["payload"]
    url = f"/notifications/deliveries/{delivery.pk}/resend/"
    assert client.post(url, {"payload": payload, "reason": ""}).status_code == 400
    assert client.post(url, {"payload": payload, "reason": "receiver lost it"}).status_code == 302
    assert client.post(url, {"payload": payload, "reason": "again"}).status_code == 302
    [record] = AdminAction.objects.all()
    assert (record.action, record.reason, record.username) == (
        "delivery.resend",
        "receiver lost it",
        "otto",
    )
    item = AdminActionItem.objects.get()
    assert item.item_id == str(delivery.delivery_id) and item.before_status == DELIVERED
    assert tasks.attempt(delivery.pk) == DELIVERED
    assert [s[0] for s in seen] == [str(delivery.delivery_id)] * 2  # the same id again


def test_a_viewer_may_not_resend(profile, client, db):
    viewer = get_user_model().objects.create_user("vera", password="pw")
    viewer.groups.add(Group.objects.get(name="viewer"))
    subscribe()
    outbox.record("job", [row("job", "jid1", 3, "Failed")])
    client.force_login(viewer)
    delivery = Delivery.objects.get()
    assert client.get(f"/notifications/deliveries/{delivery.pk}/resend/").status_code == 403


# --- the door -------------------------------------------------------------------------------


GOOD = {
    "profile": "demo",
    "submitter": "tester",
    "type": "file",
    "payload_url": "https://example.org/a.jpg",
}


@pytest.mark.parametrize(
    "fields, problem",
    [
        ({"notify_events": "sometimes", "notify_url": "https://example.org/h"}, "notify_events"),
        ({"notify_events": "all"}, "needs notify_url or notify_emails"),
        ({"notify_url": "ftp://example.org/h"}, "http or https"),
        ({"notify_url": "https://u:p@example.org/h"}, "user name or password"),
        ({"notify_url": "http://169.254.169.254/latest"}, "link-local"),
        ({"notify_url": "http://127.0.0.1:8002/"}, "loopback"),
        ({"notify_url": "http://localhost:8002/"}, "loopback"),
        ({"notify_emails": "not-an-address"}, "is not a mailbox address"),
        ({"notify_emails": ",".join(f"a{i}@example.org" for i in range(11))}, "at most 10"),
    ],
)
def test_the_door_refuses_bad_notification_fields(profile, settings, fields, problem):
    settings.MQ_ALLOW_LOOPBACK = False
    with pytest.raises(SubmissionError) as info:
        prepare(GOOD | fields)
    assert any(problem in p for p in info.value.problems), info.value.problems


def test_the_api_lists_the_notification_problems(profile, client):
    user = get_user_model().objects.create_user("depositor", password="pw")
    grant_depositor(user, ["demo"])
    token = ApiToken.issue(user, "tests")[1]
    body = {k: v for k, v in GOOD.items() if k != "submitter"}
    body |= {"notify_url": "http://10.0.0.1/h", "notify_emails": "x", "batchID": uuid.uuid4().hex}
    resp = client.post(
        "/api/v1/batches",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert resp.status_code == 400
    problems = resp.json()["errors"]
    assert any("private" in p for p in problems) and any("mailbox" in p for p in problems)


def test_a_good_subscription_is_kept_out_of_the_zookeeper_submission(profile):
    clean = prepare(GOOD | {"notify_url": "https://example.org/h", "notify_events": "failures"})
    from notifications.subscribe import take

    assert take(clean) == {"notify_url": "https://example.org/h", "notify_events": "failures"}
    assert not any(k.startswith("notify_") for k in clean)
