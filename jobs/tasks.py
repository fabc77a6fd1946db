"""RQ tasks for job steps: small functions taking ids (the dispatcher enqueues them by path)."""

from __future__ import annotations

from django.conf import settings
from django.db import close_old_connections
from rq import Worker, get_current_job

from merritt_queue.core import handover, workerfacts
from merritt_queue.core import worker as this_worker
from merritt_queue.core.lanes import express_queue_name, job_queue_name
from merritt_queue.core.queues import LEAVE_SECONDS, defer, rq_job_id
from merritt_queue.core.runner import ChainPolicy, Decision, StepResult, run_job_steps
from merritt_queue.core.sides import NONE, runs_job
from merritt_queue.project.tasks import TASKS, lane_rule
from pipeline.jobhandlers import handlers
from pipeline.services import get_services

_handlers: dict[int, dict] = {}
# The queues each worker (by name) serves: a worker's queues are fixed when it starts.
_served: dict[str, frozenset[str]] = {}


def run_job_step(jid: str, status: str) -> str:
    """Run the job's step, and its next ones while this worker serves their queues."""
    if settings.MQ_WORKERS == NONE:  # this site runs no ingest: a stray RQ job does nothing
        return "refused"
    close_old_connections()
    try:
        services = get_services()
        if id(services) not in _handlers:
            _handlers.clear()
            _handlers[id(services)] = handlers(services)
        table = _handlers[id(services)]
        current = get_current_job()
        try:
            with services.chain():
                report = run_job_steps(services.store, jid, status, table, policy=_policy(current))
        finally:
            this_worker.doing("", "")
        if current is not None and current.worker_name:
            failed = report.outcome is not None and report.outcome.action == Decision.FAIL
            workerfacts.count(
                current.connection, current.worker_name, done=report.steps, failed=int(failed)
            )
        if report.result == StepResult.LEFT and current is not None:
            defer(current.connection, rq_job_id("job", jid, status), LEAVE_SECONDS)
        if report.result == StepResult.DEFERRED and current is not None:
            # The sweep must leave alone the state the job waits in, which a chain may
            # have reached after the one this RQ job was enqueued for.
            waiting = report.job.status if report.job else status
            assert report.outcome is not None
            defer(current.connection, rq_job_id("job", jid, waiting), report.outcome.delay)
        if settings.MQ_HANDOVER and report.job and report.job.bid and current is not None:
            handover.batch_report(
                services.store, current.connection, TASKS, report.job.bid, report.job.status
            )
        return report.result.value
    finally:
        close_old_connections()


def _policy(current) -> ChainPolicy:
    """Go on through the next states whose queues this worker serves, within the budget.

    A worker started for some states only (say, a host near the storage service that
    serves only ``mq-job-storing``) never runs another state's step this way.
    """
    delay = settings.MQ_MIRROR_DELAY
    mode = settings.MQ_WORKERS
    runs = lambda job: runs_job(mode, job.configuration, job.status)  # noqa: E731
    enters = lambda job, status: runs_job(mode, job.configuration, status)  # noqa: E731
    on_step = lambda job: this_worker.doing(job.jid, job.status)  # noqa: E731
    if current is None or settings.MQ_CHAIN_STEPS <= 1:
        return ChainPolicy(changes_delay=delay, runs=runs, enters=enters, on_step=on_step)
    served = _queues_of(current)
    rule = lane_rule()

    def in_lane(job, status: str) -> bool:
        """Whether this worker serves the queue of the job's lane in ``status``: a reserved
        worker never chains into a large job's Downloading."""
        return rule.queue_name(status, job.priority, job.space_needed) in served

    return ChainPolicy(
        max_steps=settings.MQ_CHAIN_STEPS,
        max_seconds=settings.MQ_CHAIN_SECONDS,
        # A drained worker finishes its step and goes no further.
        may_enter=lambda s: (
            bool({job_queue_name(s), express_queue_name(s)} & served) and not this_worker.drained()
        ),
        changes_delay=delay,
        runs=runs,
        enters=lambda job, status: enters(job, status) and in_lane(job, status),
        on_step=on_step,
    )


def _queues_of(current) -> frozenset[str]:
    name = current.worker_name
    if not name:
        return frozenset()
    if name not in _served:
        worker = Worker.find_by_key(
            Worker.redis_worker_namespace_prefix + name, connection=current.connection
        )
        if worker is None:  # not registered (yet): one step only, ask again next time
            return frozenset()
        _served.clear()
        _served[name] = frozenset(worker.queue_names())
    return _served[name]
