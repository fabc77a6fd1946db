"""Which batches and jobs this project's workers run when Merritt's own ingest shares the
ensemble.

Both sides read the same Pending queue. Merritt's ingest writes submissions its own
workers understand (no ``payload_url``); ours mark theirs with ``created_by``. The worker
mode (``MQ_WORKERS``) says what our workers take; everything else is left for Merritt's
ingest, never failed. The dispatcher, the handlers and the web pages ask this one rule, so
what is shown as "Merritt ingest" is exactly what the workers leave alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import stepowners
from .planning import SUBMISSION_TYPES
from .rerun import RERUN_TYPE
from .states import JobStatus

# The submission (and every job configuration, through planning.INHERITED) of a batch
# submitted through this project carries CREATED_BY_KEY: CREATED_BY.
CREATED_BY_KEY = "created_by"
CREATED_BY = "merritt-queue"

ALL, OWN, NONE = "all", "own", "none"
WORKER_MODES = (ALL, OWN, NONE)
MODE_TEXT = {
    ALL: "run every batch in this project's format (no Merritt ingest on the ensemble)",
    OWN: "run only batches submitted through this project; leave the rest to Merritt's ingest",
    NONE: "run nothing: web pages, admin actions, mirror and cleanup only",
}
# What a page shows for an item our workers leave to Merritt's ingest.
MERRITT_LABEL = "Merritt ingest"


def is_ours(data: Mapping[str, Any] | None) -> bool:
    """Whether a submission or job configuration was written through this project."""
    return isinstance(data, Mapping) and data.get(CREATED_BY_KEY) == CREATED_BY


def batch_in_our_format(submission: Mapping[str, Any] | None) -> bool:
    if isinstance(submission, Mapping) and submission.get("type") == RERUN_TYPE:
        return bool(submission.get("rerun_of"))  # its jobs come from the batch it re-runs
    return (
        isinstance(submission, Mapping)
        and bool(submission.get("payload_url"))
        and submission.get("type") in SUBMISSION_TYPES
    )


def job_in_our_format(configuration: Mapping[str, Any] | None) -> bool:
    return (
        isinstance(configuration, Mapping)
        and bool(configuration.get("payload_url"))
        and bool(configuration.get("payload_type"))
    )


def runs_batch(mode: str, submission: Mapping[str, Any] | None) -> bool:
    """May our workers create the jobs of (or report) a batch with this submission?"""
    return _runs(mode, submission, batch_in_our_format(submission))


def reports_batch(mode: str, submission: Mapping[str, Any] | None) -> bool:
    """May our workers report a batch? Reporting reads only the batch's job directories, so
    any format will do; in ``own`` mode Merritt's ingest reports its own batches."""
    if mode == ALL:
        return True
    return mode == OWN and is_ours(submission)


# The steps Merritt's storage and inventory consumers take, for a job submitted under
# ``stepowners.MERRITT_QUEUE``.
MERRITT_SERVICE_STEPS: dict[str, str] = {
    JobStatus.STORING: "Merritt storage",
    JobStatus.RECORDING: "Merritt inventory",
}


def runs_job(mode: str, configuration: Mapping[str, Any] | None, status: str | None = None) -> bool:
    """May our workers run the steps of a job with this configuration (the step of
    ``status``, when given)? A ``merritt-queue`` job's Storing and Recording are Merritt's
    storage's and inventory's, whatever the worker mode."""
    if status is not None and merritt_service_of(configuration, status):
        return False
    return _runs(mode, configuration, job_in_our_format(configuration))


def merritt_service_of(configuration: Mapping[str, Any] | None, status: str) -> str | None:
    """The Merritt service whose consumer takes this job in ``status``; None when ours do."""
    if stepowners.of_job(configuration) != stepowners.MERRITT_QUEUE:
        return None
    return MERRITT_SERVICE_STEPS.get(status)


def _runs(mode: str, data, our_format: bool) -> bool:
    if mode == ALL:
        return our_format
    if mode == OWN:
        return our_format and is_ours(data)
    return False


def mode_problem(mode: object) -> str | None:
    """Why a worker mode cannot be used, in words an operator acts on; None when it can."""
    if mode in WORKER_MODES:
        return None
    choices = "; ".join(f"{m}: {MODE_TEXT[m]}" for m in WORKER_MODES)
    return f"MQ_WORKERS={mode!r} is not a worker mode. Choose one of {choices}."
