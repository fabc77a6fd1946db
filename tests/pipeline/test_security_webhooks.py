"""Webhook deliveries cannot be replayed (issue 29, finding 8).

Each subscription signs with its own secret, and the signature covers the delivery id and the
subscription id: a delivery captured from one subscriber is refused by another, a changed
delivery-id header breaks the signature, and a retry keeps its delivery id so that the
receiver recognises it. The demo receiver does exactly what docs/usage.md tells receivers to
do: a strict timestamp, the window, the signature, its own subscription, and each delivery
id taken once.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import importlib.util
import json
import re
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model

from batches.models import ApiToken, Profile
from door.rights import grant_depositor
from door.submission import submit
from merritt_queue.services import webhook
from notifications import keys, outbox, tasks
from notifications.models import DELIVERED, PENDING, PROFILE, WEBHOOK, Delivery, Subscription

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

AT = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = "https://example.org/a.jpg"


def failed_job(bid: str) -> dict:
    return {
        "bid": bid,
        "jid": "jid0000000001",
        "from_status": "Processing",
        "to_status": "Failed",
        "status_version": 3,
        "message": "",
        "at": AT,
    }


@pytest.fixture
def profile(db, settings):
    settings.MQ_ALLOW_LOOPBACK = True
    settings.MQ_NOTIFY_BACKOFF = 0
    return Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")


def subscribe(bid: str, target: str) -> Subscription:
    return Subscription.objects.create(bid=bid, channel=WEBHOOK, target=target, profile="demo")


def captured(http_server, path: str, bid: str, *, failures: int = 0):
    """A subscription to ``path``, its delivery of one failed job, attempted until the receiver
    takes it; the subscription and the requests the receiver got."""
    url = http_server.behave(path, body=b"ok", failures=failures, failure_status=503)
    subscription = subscribe(bid, url)
    outbox.record("job", [failed_job(bid)])
    delivery = Delivery.objects.get(subscription=subscription)
    outcomes = [tasks.attempt(delivery.pk) for _ in range(failures + 1)]
    assert outcomes == [PENDING] * failures + [DELIVERED]
    return subscription, http_server.requests_for(path)


def test_each_subscription_has_its_own_secret(profile):
    first = subscribe("bid0000000001", "http://127.0.0.1:9/a")
    second = subscribe("bid0000000002", "http://127.0.0.1:9/b")
    assert len(first.secret) >= 64 and len(second.secret) >= 64
    assert first.secret != second.secret
    assert profile.notify_secret not in (first.secret, second.secret)


def test_a_delivery_captured_from_one_subscriber_is_refused_by_another(profile, http_server):
    a, [request] = captured(http_server, "/a", "bid0000000001")
    b = subscribe("bid0000000002", "http://127.0.0.1:9/b")
    assert webhook.verify(a.secret, str(a.pk), request.headers, request.body)
    # B checks with its own secret and its own subscription id.
    assert not webhook.verify(b.secret, str(b.pk), request.headers, request.body)
    # Neither the profile's secret nor A's secret under B's id lets it through.
    assert not webhook.verify(profile.notify_secret, str(a.pk), request.headers, request.body)
    assert not webhook.verify(a.secret, str(b.pk), request.headers, request.body)


def test_changing_the_delivery_id_or_subscription_header_breaks_the_signature(profile, http_server):
    a, [request] = captured(http_server, "/a", "bid0000000001")
    delivery = request.headers[webhook.DELIVERY_HEADER.lower()]
    assert delivery == json.loads(request.body)["delivery_id"]
    changed = request.headers | {webhook.DELIVERY_HEADER.lower(): delivery[:-1] + "0"}
    if changed == request.headers:
        changed = request.headers | {webhook.DELIVERY_HEADER.lower(): delivery[:-1] + "1"}
    assert not webhook.verify(a.secret, str(a.pk), changed, request.body)
    other = request.headers | {webhook.SUBSCRIPTION_HEADER.lower(): str(a.pk + 1)}
    assert not webhook.verify(a.secret, str(a.pk + 1), other, request.body)


def test_a_retried_delivery_keeps_its_delivery_id_and_its_signature(profile, http_server):
    a, requests = captured(http_server, "/a", "bid0000000001", failures=2)
    assert len(requests) == 3
    ids = {r.headers[webhook.DELIVERY_HEADER.lower()] for r in requests}
    assert ids == {str(Delivery.objects.get(subscription=a).delivery_id)}
    assert {json.loads(r.body)["delivery_id"] for r in requests} == ids
    assert {json.loads(r.body)["subscription"]["id"] for r in requests} == {a.pk}
    assert all(webhook.verify(a.secret, str(a.pk), r.headers, r.body) for r in requests)


def test_the_signature_is_the_documented_canonical_string():
    body = b'{"x": 1}'
    mac = webhook.sign("k", 1700000000, "d-1", "7", body)
    expected = hmac.new(b"k", b"v2:1700000000:d-1:7:" + body, hashlib.sha256).hexdigest()
    assert mac == f"v2={expected}"


# --- the demo receiver --------------------------------------------------------------------


def demo_receiver():
    spec = importlib.util.spec_from_file_location(
        "demo_receiver", ROOT / "scripts/demo_receiver.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOOSE = [
    " 123",
    "123 ",
    "+123",
    "-123",
    "1.5e9",
    "1e9",
    "1700000000.0",
    "0x10",
    "1_700_000_000",
    "\u0661\u0662\u0663",  # Arabic-Indic digits: str.isdigit() and int() take them
    "",
    "123\n",
    "9" * 11,
    "9" * 400,
]


@pytest.mark.parametrize("stamp", LOOSE)
def test_the_demo_receiver_refuses_a_loose_timestamp(stamp):
    receiver = demo_receiver()
    assert receiver.parse_timestamp(stamp) is None
    assert receiver.parse_timestamp("1700000000") == 1700000000


@pytest.fixture
def running_demo(tmp_path):
    receiver = demo_receiver()
    secret_file = tmp_path / "demo-receiver.secret"
    secret_file.write_text("42 the-subscriptions-secret\n")
    log = tmp_path / "events.log"
    server = receiver.Receiver(("127.0.0.1", 0), secret_file, log, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/events", log
    server.shutdown()
    server.server_close()


def send(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def signed(secret: str, delivery: str, subscription: str, *, at: int | None = None):
    """A delivery as the queue sends it, signed at ``at`` (now by default)."""
    body = json.dumps(
        {"delivery_id": delivery, "event": {"id": "job:jid1:3"}, "subscription": {"id": 42}}
    ).encode()
    stamp = int(time.time()) if at is None else at
    headers = {
        "Content-Type": "application/json",
        webhook.DELIVERY_HEADER: delivery,
        webhook.SUBSCRIPTION_HEADER: subscription,
        webhook.TIMESTAMP_HEADER: str(stamp),
        webhook.SIGNATURE_HEADER: webhook.sign(secret, stamp, delivery, subscription, body),
    }
    return body, headers


def events_taken(log: Path) -> list[str]:
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line["delivery_id"] for line in lines if "event" in line]


def test_the_demo_receiver_takes_a_delivery_once_and_refuses_a_replay(running_demo):
    url, log = running_demo
    body, headers = signed("the-subscriptions-secret", "d-1", "42")
    assert send(url, body, headers) == 200
    assert send(url, body, headers) == 200  # a retry whose answer was lost, or a replay
    assert events_taken(log) == ["d-1"]


@pytest.mark.parametrize(
    "secret, subscription, stamp, at",
    [
        ("another-subscriptions-secret", "42", None, None),
        ("the-subscriptions-secret", "43", None, None),  # signed for another subscription
        # Signed over the right time: only the header's loose writing is wrong.
        ("the-subscriptions-secret", "42", "+{now}", None),
        ("the-subscriptions-secret", "42", "0{now}", None),  # HTTP strips a leading space
        ("the-subscriptions-secret", "42", "{now}.0", None),
        ("the-subscriptions-secret", "42", None, 1000),  # outside the window
    ],
)
def test_the_demo_receiver_refuses_what_the_docs_say_to_refuse(
    running_demo, secret, subscription, stamp, at
):
    url, log = running_demo
    body, headers = signed(secret, "d-2", subscription, at=at)
    if stamp is not None:
        headers[webhook.TIMESTAMP_HEADER] = stamp.format(now=headers[webhook.TIMESTAMP_HEADER])
    assert send(url, body, headers) == 401
    assert events_taken(log) == []


# --- how the secrets are made and handed out -----------------------------------------------


def api_submit(client, token: str, **fields) -> dict:
    body = {"profile": "demo", "type": "file", "payload_url": PAYLOAD}
    resp = client.post(
        "/api/v1/batches",
        json.dumps(body | fields),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert resp.status_code in (200, 201), resp.content
    return resp.json()


def test_the_submission_s_answer_gives_its_webhook_s_id_and_secret_once(pipeline, client):
    user = get_user_model().objects.create_user("depositor", password="pw")
    grant_depositor(user, ["demo"])
    token = ApiToken.issue(user, "tests")[1]
    fields = {"batchID": "hooked", "notify_url": "https://example.org/hook"}
    answer = api_submit(client, token, **fields)
    subscription = Subscription.objects.get(bid=answer["batch_id"], channel=WEBHOOK)
    assert answer["webhook"] == {"subscription_id": subscription.pk, "secret": subscription.secret}
    again = api_submit(client, token, **fields)
    assert again["duplicate"] and "webhook" not in again


def test_a_profile_default_s_secret_derives_from_the_profile_key_and_follows_its_rotation(
    pipeline,
):
    profile = pipeline.profile
    profile.notify_url = "https://example.org/collection-hook"
    profile.save()
    result = submit({"profile": "demo", "submitter": "t", "type": "file", "payload_url": PAYLOAD})
    assert result.webhook is None  # the profile's receiver derives it; the depositor is not told
    subscription = Subscription.objects.get(bid=result.bid, channel=WEBHOOK)
    assert subscription.source == PROFILE
    assert subscription.secret == keys.derived(profile.notify_secret, subscription.pk)
    old = subscription.secret
    profile.rotate_notify_secret()
    subscription.refresh_from_db()
    assert subscription.secret == keys.derived(profile.notify_secret, subscription.pk) != old


def test_the_migration_gives_each_existing_subscription_its_own_secret(profile):
    named = subscribe("bid0000000001", "http://127.0.0.1:9/a")
    default = Subscription.objects.create(
        bid="bid0000000002", channel=WEBHOOK, target="http://127.0.0.1:9/b", profile="demo"
    )
    Subscription.objects.filter(pk=default.pk).update(source=PROFILE)
    Subscription.objects.update(secret="")
    migration = importlib.import_module("notifications.migrations.0002_subscription_secret")
    migration.give_secrets(django_apps, None)
    named.refresh_from_db()
    default.refresh_from_db()
    assert len(named.secret) == 64 and named.secret != profile.notify_secret
    assert default.secret == keys.derived(profile.notify_secret, default.pk)


def test_an_admin_rotates_a_subscription_s_secret_and_sees_it_once(profile, admin_client):
    named = subscribe("bid0000000001", "http://127.0.0.1:9/a")
    default = subscribe("bid0000000002", "http://127.0.0.1:9/b")
    Subscription.objects.filter(pk=default.pk).update(source=PROFILE)
    before = {s.pk: s.secret for s in Subscription.objects.all()}
    resp = admin_client.post(
        "/admin/notifications/subscription/",
        {"action": "rotate_secret", "_selected_action": [named.pk, default.pk]},
        follow=True,
    )
    named.refresh_from_db()
    default.refresh_from_db()
    assert named.secret != before[named.pk] and default.secret == before[default.pk]
    shown = [str(m) for m in resp.context["messages"]]
    assert any(named.secret in m for m in shown)
    assert any("profile's default" in m for m in shown)
    page = admin_client.get(f"/admin/notifications/subscription/{named.pk}/change/")
    assert named.secret not in page.content.decode()


def test_the_demo_receiver_takes_what_the_queue_sends_once(profile, running_demo):
    url, log = running_demo
    subscription = subscribe("bid0000000001", url)
    log.parent.joinpath("demo-receiver.secret").write_text(
        f"{subscription.pk} {subscription.secret}\n"
    )
    outbox.record("job", [failed_job("bid0000000001")])
    delivery = Delivery.objects.get()
    assert tasks.attempt(delivery.pk) == DELIVERED
    Delivery.objects.filter(pk=delivery.pk).update(status=PENDING)  # as a resend does
    assert tasks.attempt(delivery.pk) == DELIVERED
    assert events_taken(log) == [str(delivery.delivery_id)]


def test_the_documented_receiver_checks_what_the_queue_signs():
    text = (ROOT / "docs/usage.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "def check(" in b]
    scope: dict = {}
    exec(block, scope)  # the example as a depositor would copy it
    check = scope["check"]
    body, headers = signed("the-subscriptions-secret", "d-1", "42")
    taken: dict = {}
    assert check("42", "the-subscriptions-secret", headers, body, taken) == "take"
    assert check("42", "the-subscriptions-secret", headers, body, taken) == "repeat"
    assert check("43", "the-subscriptions-secret", headers, body, {}) == "refuse"
    assert check("42", "another-secret", headers, body, {}) == "refuse"
    loose = headers | {webhook.TIMESTAMP_HEADER: "+" + headers[webhook.TIMESTAMP_HEADER]}
    assert check("42", "the-subscriptions-secret", loose, body, {}) == "refuse"
    moved = headers | {webhook.DELIVERY_HEADER: "d-2"}
    assert check("42", "the-subscriptions-secret", moved, body, {}) == "refuse"
