"""Stalled jobs and capacity ahead at each scrape, from the same code as the pages
(``jobs.stalls``, ``ui.ahead``), so /metrics and the dashboard say the same.

Cheap by their own caches: the step-time models are learned every
``MQ_STALL_MODEL_SECONDS``, the stalled jobs and the last hour's rates read every
``STALLED_CACHE_SECONDS`` and ``AHEAD_CACHE_SECONDS``; the backlog comes from the counts by
status the collector read already.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from jobs import stalls
from merritt_queue.core.steptimes import StepModel
from ui.ahead import Ahead, ahead


def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


def read_foresight(job_counts: dict[str, int]) -> list[Metric]:
    """Read at the scrape (with the mirror: a database away drops these too)."""
    return [
        *stall_metrics(stalls.stalled_by_state(), stalls.models()),
        *ahead_metrics(ahead(job_counts)),
    ]


def stall_metrics(stalled: dict[str, int], models: dict[str, StepModel]) -> Iterator[Metric]:
    found = gauge(
        "mq_jobs_stalled",
        "Jobs far longer in their step than jobs of their size usually take there, by state "
        "(0 also where too little history allows no judgement).",
        ("state",),
    )
    for state, n in stalled.items():
        found.add_metric([state], n)
    yield found
    learned = gauge(
        "mq_stall_history_steps",
        "Finished steps each state's usual time was learned from; below MQ_STALL_MIN_SAMPLES "
        "its jobs are not judged.",
        ("state",),
    )
    for state, model in models.items():
        learned.add_metric([state], model.samples)
    yield learned


def ahead_metrics(figures: Ahead) -> Iterator[Metric]:
    backlog = gauge("mq_backlog_jobs", "Jobs Pending or in a step: the work ahead.")
    backlog.add_metric([], figures.backlog)
    yield backlog
    finished = gauge(
        "mq_jobs_finished_last_hour", "Jobs that reached Completed or Failed in the last hour."
    )
    finished.add_metric([], figures.hour.finished)
    yield finished
    if figures.backlog_seconds is not None:
        eta = gauge(
            "mq_backlog_seconds",
            "Seconds the backlog takes at the last hour's rate (absent when none finished).",
        )
        eta.add_metric([], figures.backlog_seconds)
        yield eta
    disk = figures.disk
    if disk is None:
        return
    used = gauge(
        "mq_work_disk_used_percent",
        "Percent of the working disk unusable to the workers (Provisioning waits past "
        "MQ_DISK_THRESHOLD).",
    )
    used.add_metric([], disk.percent)
    yield used
    if disk.seconds is not None:
        crossing = gauge(
            "mq_work_disk_threshold_seconds",
            "Seconds until the working disk crosses MQ_DISK_THRESHOLD at the last hour's net "
            "rate (0: over it; absent when it is not filling).",
        )
        crossing.add_metric([], disk.seconds)
        yield crossing
