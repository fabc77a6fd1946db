"""The project's RQ tasks, by the dotted path the dispatcher enqueues them under: the apps
that run a job's step and a batch's, which the queue core does not know by name; and the
dispatcher's periodic hook (``TICK``, called with the store), which applies maintenance
windows."""

from __future__ import annotations

from ..core.dispatcher import Tasks

TASKS = Tasks(
    job_step="jobs.tasks.run_job_step",
    batch_pending="batches.tasks.run_batch_pending",
    batch_report="batches.tasks.run_batch_report",
)

# Run by the dispatcher after each full sweep: queue the notifications that are due (a
# retry's time has come, or Redis was away when they were written).
PERIODIC = "notifications.tasks.sweep"
TICK = "steering.scheduler.apply_windows"
