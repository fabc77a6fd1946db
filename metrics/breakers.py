"""The circuit breakers' figures (``merritt_queue.services.breakers``), as /metrics shows
them: read in the collector's ZooKeeper read, from the same snapshot the dashboard shows."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from merritt_queue.services.breakers import BreakerState


def breaker_metrics(states: list[BreakerState] | None) -> Iterator[Metric]:
    """Nothing when ZooKeeper was not read: ``mq_zookeeper_up`` says so."""
    if states is None:
        return
    opened = GaugeMetricFamily(
        "mq_breaker_open",
        "1 while the dependency's circuit breaker is open (the jobs that need it wait), else 0.",
        labels=["dependency"],
    )
    failures = CounterMetricFamily(
        "mq_breaker_failures",
        "Transient failures (connection refused, timeouts, 5xx) counted against the dependency.",
        labels=["dependency"],
    )
    for s in states:
        opened.add_metric([s.name], 1 if s.is_open else 0)
        failures.add_metric([s.name], s.failures_total)
    yield opened
    yield failures
