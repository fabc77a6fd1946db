"""The project's RQ tasks, by the dotted path the dispatcher enqueues them under: the apps
that run a job's step and a batch's, which the queue core does not know by name. (The
dispatcher's periodic work is ``periodic.py``.)"""

from __future__ import annotations

from ..core.dispatcher import Tasks

TASKS = Tasks(
    job_step="jobs.tasks.run_job_step",
    batch_pending="batches.tasks.run_batch_pending",
    batch_report="batches.tasks.run_batch_report",
)
