"""The project's RQ tasks, by the dotted path the dispatcher enqueues them under: the apps
that run a job's step and a batch's, which the queue core does not know by name; and the
worker class that runs them (``settings.RQ``). (The dispatcher's periodic work is
``periodic.py``.)"""

from __future__ import annotations

from dataclasses import astuple

from ..core.dispatcher import Tasks
from ..core.worker import QueueWorker

TASKS = Tasks(
    job_step="jobs.tasks.run_job_step",
    batch_pending="batches.tasks.run_batch_pending",
    batch_report="batches.tasks.run_batch_report",
)


class Worker(QueueWorker):
    """The project's RQ worker: a ``QueueWorker`` that has the tasks' modules imported before
    it takes its first job."""

    preload = tuple(dict.fromkeys(path.rpartition(".")[0] for path in astuple(TASKS)))
