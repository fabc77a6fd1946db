"""The project's RQ tasks, by the dotted path the dispatcher enqueues them under: the apps
that run a job's step and a batch's, which the queue core does not know by name; and the
worker class that runs them (``settings.RQ``). (The dispatcher's periodic work is
``periodic.py``.)"""

from __future__ import annotations

import os
from dataclasses import astuple
from pathlib import Path

from django.conf import settings

from ..core.lanes import LaneRule
from ..core.queues import Tasks
from ..core.states import JobStatus
from ..core.worker import QueueWorker
from ..core.workerfacts import Record

TASKS = Tasks(
    job_step="jobs.tasks.run_job_step",
    batch_pending="batches.tasks.run_batch_pending",
    batch_report="batches.tasks.run_batch_report",
)


def lane_rule() -> LaneRule:
    """Which jobs are small or urgent, from the settings (``core.lanes``)."""
    return LaneRule(
        small_bytes=settings.MQ_SMALL_JOB_BYTES, urgent_priority=settings.MQ_URGENT_PRIORITY
    )


# Files a download's progress adds up, at most: a container of many thousand entries is
# unpacked after its download, so a download itself writes few.
PROGRESS_FILES = 1000


class Worker(QueueWorker):
    """The project's RQ worker: a ``QueueWorker`` that has the tasks' modules imported before
    it takes its first job, and tells the Workers page how far a download has got."""

    preload = tuple(dict.fromkeys(path.rpartition(".")[0] for path in astuple(TASKS)))
    beat_seconds = settings.MQ_WORKER_BEAT_SECONDS

    def progress(self, record: Record) -> int | None:
        """A download's bytes so far: the sizes of the files in its job's work directory, where
        the fetcher writes as it reads (read from the file system, nothing asked of the
        download itself)."""
        if record.step != JobStatus.DOWNLOADING:
            return None
        return directory_bytes(Path(settings.MQ_WORK_DIR) / "jobs" / record.jid)


def directory_bytes(root: Path, most: int = PROGRESS_FILES) -> int:
    total, seen = 0, 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError:  # renamed or removed meanwhile
                continue
            seen += 1
            if seen >= most:
                return total
    return total
