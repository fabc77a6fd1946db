"""What this process's workers did, counted for ``/metrics`` (prometheus_client).

The runner calls ``step_committed`` when a step's outcome is committed and
``step_abandoned`` when it is not; each is a few dictionary look-ups and, in
multiprocess mode, a write to a memory-mapped file: nothing next to a ZooKeeper multi.
Neither raises: a count that cannot be kept is logged and lost.

Multiprocess mode: when ``PROMETHEUS_MULTIPROC_DIR`` names a directory, every
process keeps its values in its own files there and ``/metrics`` sums them over
all processes (the web app's, the workers', the dispatcher's). prometheus_client
reads that variable once, when it is first imported, so this module imports it
only at the first step: by then the Django settings have exported the directory
(``MQ_METRICS_DIR``). Without it, the counts live in this process alone.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any

STEPS = "mq_job_steps"
TRANSITIONS = "mq_job_transitions"
FAILURES = "mq_job_failures"
DURATION = "mq_job_step_duration_seconds"

# From a quick identification to a download of many gigabytes.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400)

log = logging.getLogger(__name__)

_lock = threading.Lock()
_metrics: dict[str, Any] = {}
_failed = False


def _made() -> dict[str, Any]:
    if _metrics:
        return _metrics
    with _lock:
        if _metrics:
            return _metrics
        from prometheus_client import Counter, Histogram

        # In no registry of their own: /metrics builds one per scrape (register_in), and
        # in multiprocess mode reads the files these write instead.

        made = {
            STEPS: Counter(
                STEPS,
                "Job steps run by this site's workers, by step and outcome "
                "(success, fail, later, move, abandoned).",
                ["step", "outcome"],
                registry=None,
            ),
            TRANSITIONS: Counter(
                TRANSITIONS,
                "Job status changes committed by this site's workers.",
                ["from_status", "to_status"],
                registry=None,
            ),
            FAILURES: Counter(FAILURES, "Jobs failed by a step, by step.", ["step"], registry=None),
            DURATION: Histogram(
                DURATION,
                "Time a job step's handler took, by step (committed steps only).",
                ["step"],
                buckets=DURATION_BUCKETS,
                registry=None,
            ),
        }
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            atexit.register(_process_ends, os.getpid())
        _metrics.update(made)
    return _metrics


def _process_ends(pid: int) -> None:
    """Drop this process's live-gauge files; its counters stay, so the sums never go down."""
    if pid != os.getpid():  # a forked child inherited the hook
        return
    from prometheus_client import multiprocess

    try:
        multiprocess.mark_process_dead(pid)
    except OSError:
        pass  # the directory went away first (emptied at a restart): nothing to drop


def register_in(registry: Any) -> None:
    """Show this process's own counts in ``registry`` (without a multiprocess directory,
    where ``/metrics`` reads every process's files instead)."""
    for metric in _made().values():
        registry.register(metric)


# The labelled children of each (step, outcome, to_status) seen: looked up once, since
# prometheus_client's ``labels()`` costs more than the increments themselves.
_children: dict[tuple[str, str, str], tuple[Any, ...]] = {}


def _of(step: str, outcome: str, to_status: str) -> tuple[Any, ...]:
    key = (step, outcome, to_status)
    found = _children.get(key)
    if found is None:
        m = _made()
        found = (
            m[STEPS].labels(step, outcome),
            m[DURATION].labels(step),
            m[TRANSITIONS].labels(step, to_status) if to_status != step else None,
            m[FAILURES].labels(step) if outcome == "fail" else None,
        )
        _children[key] = found
    return found


def step_committed(step: str, outcome: str, to_status: str, seconds: float) -> None:
    """A step of a job in ``step`` ran for ``seconds`` and its ``outcome`` committed,
    leaving the job in ``to_status``."""
    try:
        steps, duration, transition, failure = _of(str(step), str(outcome), str(to_status))
        steps.inc()
        duration.observe(seconds)
        if transition is not None:
            transition.inc()
        if failure is not None:
            failure.inc()
    except Exception as e:
        _not_counted(e)


def step_abandoned(step: str) -> None:
    """A step of a job in ``step`` committed nothing (ZooKeeper away, lock lost)."""
    try:
        _of(str(step), "abandoned", str(step))[0].inc()
    except Exception as e:
        _not_counted(e)


def _not_counted(e: Exception) -> None:
    """Counting comes after the step's commit, which may have kept the job's lock for the
    next step: a count that cannot be written (a metrics directory this process may not
    write, or gone) must cost the count, never the job. Said once per process."""
    global _failed
    if not _failed:
        _failed = True
        log.warning("/metrics: this process's step counts are not kept: %r", e)
