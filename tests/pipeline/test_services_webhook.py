"""The signed POST of a notification (services.webhook) against a real receiver on 127.0.0.1."""

import json

import pytest

from merritt_queue.services import webhook
from tests.httpserver import Reply

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")

SECRET = "s3cret"
SUBSCRIPTION = "7"
BODY = json.dumps(
    {"delivery_id": "d-1", "event": {"status": "Failed"}, "subscription": {"id": 7}}
).encode()


def verifying(seen: list):
    """A receiver that checks the signature as docs/usage.md tells depositors to."""

    def handler(rec) -> Reply:
        ok = webhook.verify(SECRET, SUBSCRIPTION, rec.headers, rec.body)
        seen.append((rec.headers["x-merritt-queue-delivery"], ok))
        return Reply(200 if ok else 401, b"ok\n" if ok else b"bad signature\n")

    return handler


def post(url: str, **kwargs) -> webhook.Attempt:
    options = {
        "secret": SECRET,
        "delivery_id": "d-1",
        "subscription_id": SUBSCRIPTION,
        "event": "job:jid1:7",
    }
    return webhook.post(url, BODY, **(options | {"allow_loopback": True} | kwargs))


def test_a_receiver_that_checks_the_signature_accepts_the_delivery(http_server, session_factory):
    seen: list = []
    url = http_server.behave("/hook", handler=verifying(seen))
    result = post(url, session_factory=session_factory)
    assert result == webhook.Attempt(True, 200, "200 OK: ok", False)
    assert seen == [("d-1", True)]
    [request] = http_server.requests_for("/hook")
    assert request.body == BODY
    assert request.headers["x-merritt-queue-event"] == "job:jid1:7"
    assert request.headers["x-merritt-queue-subscription"] == SUBSCRIPTION
    assert request.headers["x-merritt-queue-signature"].startswith("v2=")
    assert request.headers["idempotency-key"] == "d-1"


def test_another_secret_is_refused_by_the_receiver(http_server, session_factory):
    seen: list = []
    url = http_server.behave("/hook", handler=verifying(seen))
    result = post(url, secret="not the profile's", session_factory=session_factory)
    assert not result.delivered and result.status == 401 and not result.retryable
    assert result.detail == "401 Unauthorized: bad signature"


def headers(stamp: str, signature: str, delivery: str = "d-1") -> dict[str, str]:
    return {
        webhook.DELIVERY_HEADER: delivery,
        webhook.SUBSCRIPTION_HEADER: SUBSCRIPTION,
        webhook.TIMESTAMP_HEADER: stamp,
        webhook.SIGNATURE_HEADER: signature,
    }


def test_verify_refuses_an_old_timestamp_a_changed_body_and_a_bad_stamp():
    signature = webhook.sign(SECRET, 1000, "d-1", SUBSCRIPTION, BODY)
    good = headers("1000", signature)
    assert webhook.verify(SECRET, SUBSCRIPTION, good, BODY, now=1100)
    assert not webhook.verify(SECRET, SUBSCRIPTION, good, BODY, now=2000)  # a replay
    assert not webhook.verify(SECRET, SUBSCRIPTION, good, BODY + b" ", now=1100)
    for stamp in ("x", " 1000", "+1000", "1000.0", "1e3"):
        assert not webhook.verify(SECRET, SUBSCRIPTION, headers(stamp, signature), BODY, now=1100)
    assert not webhook.verify(
        SECRET, SUBSCRIPTION, headers("1000", signature, "d-2"), BODY, now=1100
    )
    assert not webhook.verify(SECRET, "8", good, BODY, now=1100)  # another subscription's


def test_a_5xx_is_retryable_and_its_answer_is_kept_short(http_server, session_factory):
    long = b"x" * 10_000
    url = http_server.behave("/hook", handler=lambda rec: Reply(503, long))
    result = post(url, session_factory=session_factory)
    assert not result.delivered and result.status == 503 and result.retryable
    assert len(result.detail) < webhook.EXCERPT + 40


def test_a_redirect_is_not_followed(http_server, session_factory):
    url = http_server.behave("/hook", redirect="http://user:pw@127.0.0.1:1/elsewhere")
    result = post(url, session_factory=session_factory)
    assert not result.delivered and result.status == 302 and not result.retryable
    assert "redirects are not followed" in result.detail and "pw" not in result.detail
    assert len(http_server.requests) == 1


def test_the_ssrf_guard_refuses_before_connecting(http_server):
    url = http_server.behave("/hook", body=b"ok")
    result = post(url, allow_loopback=False)
    assert not result.delivered and result.status is None and not result.retryable
    assert "loopback" in result.detail
    assert http_server.requests == []


def test_a_refused_connection_is_retryable():
    result = post("http://127.0.0.1:1/hook")
    assert not result.delivered and result.retryable and result.detail == "connection refused"
