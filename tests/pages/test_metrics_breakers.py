"""/metrics shows each dependency's circuit breaker, read from ZooKeeper with the snapshot
the dashboard shows: ``mq_breaker_open`` and ``mq_breaker_failures_total``."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from merritt_queue.project import runtime
from merritt_queue.project.breakerboard import breakers
from metrics import collector as c


@pytest.fixture
def scraped(settings, process_store):
    settings.MQ_METRICS_TOKEN = ""
    settings.MQ_METRICS_ALLOW = "127.0.0.0/8,::1/128"
    yield
    if c._pending is not None:
        c._pending.exception(timeout=10)
    runtime.close()


def samples(client) -> dict[tuple[str, str], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        (s.name, s.labels.get("dependency", "")): s.value
        for f in text_string_to_metric_families(response.content.decode())
        if f.name.startswith("mq_breaker")
        for s in f.samples
    }


def test_an_open_breaker_and_its_failures_show_per_dependency(client, scraped):
    board = breakers()
    for _ in range(board.policy.threshold):
        board.failed("ezid", "EZID at http://ezid could not be reached: connection refused")
    board.failed("webhook:hooks.example.org", "500")
    shown = samples(client)
    assert shown[("mq_breaker_open", "ezid")] == 1
    assert shown[("mq_breaker_failures_total", "ezid")] == board.policy.threshold
    assert shown[("mq_breaker_open", "storage")] == 0
    assert shown[("mq_breaker_open", "webhook:hooks.example.org")] == 0
    assert shown[("mq_breaker_failures_total", "webhook:hooks.example.org")] == 1

    board.close_by_hand("ezid", "admin", "EZID is back")
    assert samples(client)[("mq_breaker_open", "ezid")] == 0
