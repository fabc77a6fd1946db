"""The names the rest of the project uses to write the mirror (see the package's docstring)."""

from __future__ import annotations

from .locks import apply_collection, locks_detail, refresh_locks, sync_collections
from .rebuild import Drift, full_reconcile, kept_report, report_lines
from .rows import (
    BATCH_FIELDS,
    JOB_FIELDS,
    JOB_STATUS_FIELDS,
    LOCAL_ID_SEPARATOR,
    batch_values,
    job_values,
    local_ids_text,
)
from .upsert import (
    FULL,
    LOCKS,
    WATCH,
    WRITE_THROUGH,
    apply_batch,
    apply_batches,
    apply_job,
    apply_job_statuses,
    apply_jobs,
    mark,
    recount,
    remove_batch,
    remove_batches,
    remove_job,
    remove_jobs,
)
from .writethrough import apply_change, apply_changes, apply_job_data, make_listener

__all__ = [
    "BATCH_FIELDS",
    "FULL",
    "JOB_FIELDS",
    "JOB_STATUS_FIELDS",
    "LOCAL_ID_SEPARATOR",
    "LOCKS",
    "WATCH",
    "WRITE_THROUGH",
    "Drift",
    "apply_batch",
    "apply_batches",
    "apply_change",
    "apply_changes",
    "apply_collection",
    "apply_job",
    "apply_job_data",
    "apply_job_statuses",
    "apply_jobs",
    "batch_values",
    "full_reconcile",
    "job_values",
    "kept_report",
    "local_ids_text",
    "locks_detail",
    "make_listener",
    "mark",
    "recount",
    "refresh_locks",
    "remove_batch",
    "remove_batches",
    "remove_job",
    "remove_jobs",
    "report_lines",
    "sync_collections",
]
