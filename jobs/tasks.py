"""RQ tasks for job steps: small functions taking ids (the dispatcher enqueues them by path)."""

from __future__ import annotations

from django.db import close_old_connections
from rq import get_current_job

from merritt_queue.dispatcher import defer
from merritt_queue.runner import StepResult
from merritt_queue.runner import run_job_step as run_step

from .handlers import handlers
from .services import get_services

_handlers: dict[int, dict] = {}


def run_job_step(jid: str, status: str) -> str:
    close_old_connections()
    try:
        services = get_services()
        if id(services) not in _handlers:
            _handlers.clear()
            _handlers[id(services)] = handlers(services)
        table = _handlers[id(services)]
        report = run_step(services.store, jid, status, table[status])
        if report.result == StepResult.DEFERRED:
            current = get_current_job()
            if current is not None:
                defer(current.connection, current.id, report.outcome.delay)
        return report.result.value
    finally:
        close_old_connections()
