"""RQ tasks for batches: create a Pending batch's jobs; report a finished batch."""

from __future__ import annotations

from django.conf import settings
from django.db import close_old_connections
from rq import get_current_job

from merritt_queue.core import handover
from merritt_queue.core.queues import LEAVE_SECONDS, defer, rq_job_id
from merritt_queue.project.tasks import TASKS, lane_rule
from pipeline import batchhandlers as handlers
from pipeline.services import get_services


def run_batch_pending(bid: str, status: str = "Pending") -> str:
    close_old_connections()
    try:
        services = get_services()
        result = handlers.run_pending(services, bid)
        current = get_current_job()
        if result == "processing" and current is not None and settings.MQ_HANDOVER:
            handover.new_jobs(services.store, current.connection, TASKS, bid, lane_rule())
        return _left(result, bid, status)
    finally:
        close_old_connections()


def run_batch_report(bid: str, status: str) -> str:
    close_old_connections()
    try:
        return _left(handlers.run_report(get_services(), bid, status), bid, status)
    finally:
        close_old_connections()


def _left(result: str, bid: str, status: str) -> str:
    """Keep the sweep from enqueueing again a batch left to Merritt's ingest."""
    current = get_current_job()
    if result == handlers.MERRITT and current is not None:
        defer(current.connection, rq_job_id("batch", bid, status), LEAVE_SECONDS)
    return result
