"""RQ tasks of admin actions: the view records the action, a worker on ``mq-admin`` acts.
Bulk actions run here; maintenance operations (``steering.maintenance.operations``) are queued and
guarded the same way."""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.db import close_old_connections, connection
from redis import Redis
from rq import Queue

from merritt_queue.core.queues import ADMIN_QUEUE
from steering.actions.execution import run_items
from steering.models import AdminAction

TASK = "steering.tasks.run_admin_action"
# An admin action may touch every item of the queue: the job is never cut short.
TIMEOUT = 24 * 3600


def enqueue(record: AdminAction, redis: Redis, task: str = TASK, job_id: str = "") -> None:
    """Queue ``task`` on ``record``; one RQ job per action (its id is derived from the record)."""
    Queue(ADMIN_QUEUE, connection=redis).enqueue(
        task, record.pk, job_id=job_id or f"mq-admin-action-{record.pk}", job_timeout=TIMEOUT
    )


def on_worker(task: Callable[[int], str]) -> Callable[[int], str]:
    """A task on a long-lived worker: a fresh database connection before and after it, except
    inside a transaction (tests run the worker in theirs, which must stay)."""

    @functools.wraps(task)
    def run(action_id: int) -> str:
        if not connection.in_atomic_block:
            close_old_connections()
        try:
            return task(action_id)
        finally:
            if not connection.in_atomic_block:
                close_old_connections()

    return run


@on_worker
def run_admin_action(action_id: int) -> str:
    """Act on the items of admin action ``action_id`` not yet acted on; a no-op once finished."""
    record = AdminAction.objects.filter(pk=action_id).first()
    if record is None:
        return "gone"
    was_finished = record.finished is not None
    record = run_items(record)
    return "already finished" if was_finished else f"{record.done} done"
