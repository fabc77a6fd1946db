"""The pre-flight's HEADs respect the content hosts' circuit breakers (ZooKeeper): a host
whose breaker is open is not asked, and a pre-flight's failures open no breaker."""

from __future__ import annotations

import pytest

from batches.models import Profile
from batches.preflight import summarise
from merritt_queue.project.breakerboard import breakers
from tests.pages.test_preservation_preflight import checkm

pytest_plugins = ["tests.httpserver"]


@pytest.fixture(autouse=True)
def _site(process_store, settings):
    settings.MQ_ALLOW_LOOPBACK = True
    settings.MQ_BREAKER_THRESHOLD = 1
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")


def test_a_host_whose_breaker_is_open_is_not_asked(http_server):
    (http_server.root / "a.txt").write_bytes(b"x")
    host = http_server.url.split("://")[1]
    breakers().open_by_hand(f"content:{host}", "ada", "the host's weekly maintenance")
    data = checkm(f"{http_server.url_for('/a.txt')} | 1 | a.txt | a-1")
    [row] = summarise(data, profile="demo")["sample"]
    assert row["status"] is None and "circuit breaker is open" in row["error"]
    assert "ada" not in row["error"]  # staff's names are not the depositor's to read
    assert http_server.requests_for("/a.txt") == []


def test_a_preflights_failures_open_no_breaker(http_server):
    http_server.behave("/down.txt", status=503)
    host = http_server.url.split("://")[1]
    data = checkm(f"{http_server.url_for('/down.txt')} | 1 | down.txt | a-1")
    for _ in range(3):
        [row] = summarise(data, profile="demo")["sample"]
        assert row["status"] == 503
    state = breakers().read(f"content:{host}")
    assert not state.is_open and state.failures == 0
