"""RQ task for bulk admin actions: the view records the action, a worker on ``mq-admin`` acts."""

from __future__ import annotations

from django.db import close_old_connections, connection
from redis import Redis
from rq import Queue

from merritt_queue.core.dispatcher import ADMIN_QUEUE
from steering.actions import run_items
from steering.models import AdminAction

TASK = "steering.tasks.run_admin_action"


def enqueue(record: AdminAction, redis: Redis) -> None:
    """Queue the action's items; one RQ job per action (its id is derived from the record)."""
    Queue(ADMIN_QUEUE, connection=redis).enqueue(
        TASK, record.pk, job_id=f"mq-admin-action-{record.pk}", job_timeout=24 * 3600
    )


def run_admin_action(action_id: int) -> str:
    """Act on the items of admin action ``action_id`` not yet acted on; a no-op once finished."""
    if not connection.in_atomic_block:  # tests run the worker inside their transaction
        close_old_connections()
    try:
        record = AdminAction.objects.filter(pk=action_id).first()
        if record is None:
            return "gone"
        was_finished = record.finished is not None
        record = run_items(record)
        return "already finished" if was_finished else f"{record.done} done"
    finally:
        if not connection.in_atomic_block:
            close_old_connections()
