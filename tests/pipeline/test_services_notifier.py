"""CallbackNotifier against a real HTTP server on 127.0.0.1."""

import json

import pytest

from merritt_queue.services.errors import NotifyError
from merritt_queue.services.notifier import CallbackNotifier

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")

PAYLOAD = {"job": "jid-1", "ark": "ark:/99999/fk4bbbbbb7", "status": "Completed"}


@pytest.fixture
def notifier(session_factory):
    def make(**kwargs) -> CallbackNotifier:
        options = {"allow_loopback": True, "backoff": 0.01, "session_factory": session_factory}
        return CallbackNotifier(**(options | kwargs))

    return make


def test_payload_is_posted_as_json(http_server, notifier):
    url = http_server.behave("/hook", body=b"thanks\n")
    notifier().notify(url, PAYLOAD, idempotency_key="jid-1:notify")
    [request] = http_server.requests_for("/hook")
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["idempotency-key"] == "jid-1:notify"
    assert json.loads(request.body) == PAYLOAD


def test_500_three_times_gives_up_with_the_last_status(http_server, notifier):
    url = http_server.behave("/hook", status=500)
    with pytest.raises(NotifyError) as info:
        notifier(retries=3).notify(url, PAYLOAD)
    assert str(info.value) == f"callback {url} failed after 3 attempts: 500 Internal Server Error"
    assert info.value.retryable is True
    requests = http_server.requests_for("/hook")
    assert len(requests) == 3
    assert len({r.headers["idempotency-key"] for r in requests}) == 1  # one delivery, retried


def test_503_then_success_is_retried(http_server, notifier):
    url = http_server.behave("/hook", body=b"ok", failures=2, failure_status=503)
    notifier(retries=3).notify(url, PAYLOAD)
    assert len(http_server.requests_for("/hook")) == 3


def test_connection_refused(notifier):
    url = "http://127.0.0.1:1/hook"
    with pytest.raises(NotifyError) as info:
        notifier(retries=2).notify(url, PAYLOAD)
    assert str(info.value) == f"callback {url} failed after 2 attempts: connection refused"
    assert info.value.retryable is True


def test_4xx_is_not_retried(http_server, notifier):
    url = http_server.behave("/hook", status=400)
    with pytest.raises(NotifyError) as info:
        notifier().notify(url, PAYLOAD)
    assert str(info.value) == f"callback {url} refused the notification: 400 Bad Request"
    assert info.value.retryable is False
    assert len(http_server.requests_for("/hook")) == 1


def test_redirect_is_not_followed(http_server, notifier):
    url = http_server.behave("/hook", redirect="http://169.254.169.254/")
    with pytest.raises(NotifyError, match="302 Found"):
        notifier().notify(url, PAYLOAD)
    assert len(http_server.requests) == 1


def test_loopback_callback_refused_by_default(http_server, notifier):
    url = http_server.behave("/hook", body=b"ok")
    with pytest.raises(NotifyError) as info:
        notifier(allow_loopback=False).notify(url, PAYLOAD)
    assert str(info.value).startswith(f"callback refused {url}: host 127.0.0.1 resolves to")
    assert info.value.retryable is False
    assert http_server.requests == []
