"""The job and batch state machines as data.

One table per machine is shared by the queue core, the handlers, the mirror
models (``choices=``) and the UI's state diagram, so a transition rule lives in
exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .errors import InvalidTransition


class JobStatus(StrEnum):
    PENDING = "Pending"
    HELD = "Held"
    ESTIMATING = "Estimating"
    PROVISIONING = "Provisioning"
    DOWNLOADING = "Downloading"
    PROCESSING = "Processing"
    STORING = "Storing"
    RECORDING = "Recording"
    NOTIFY = "Notify"
    COMPLETED = "Completed"
    FAILED = "Failed"
    DELETED = "Deleted"


class BatchStatus(StrEnum):
    PENDING = "Pending"
    HELD = "Held"
    PROCESSING = "Processing"
    REPORTING = "Reporting"
    UPDATE_REPORTING = "UpdateReporting"
    COMPLETED = "Completed"
    FAILED = "Failed"
    DELETED = "Deleted"


@dataclass(frozen=True)
class Machine:
    """A state machine: allowed moves, the success path and the failure state."""

    name: str
    statuses: tuple[str, ...]
    transitions: dict[str, frozenset[str]]
    success: dict[str, str]
    failed: str
    deleted: str

    def can_move(self, old: str, new: str) -> bool:
        return new in self.transitions.get(old, frozenset())

    def check_move(self, old: str, new: str, what: str) -> None:
        if new not in self.statuses:
            raise InvalidTransition(f"{what}: {new!r} is not a {self.name} status")
        if not self.can_move(old, new):
            allowed = ", ".join(sorted(self.transitions.get(old, ()))) or "nothing (terminal)"
            raise InvalidTransition(
                f"{what}: cannot move from {old} to {new}; from {old} it may move to {allowed}"
            )

    def success_of(self, status: str) -> str:
        try:
            return self.success[status]
        except KeyError:
            raise InvalidTransition(f"{self.name} status {status} has no success step") from None

    def is_terminal(self, status: str) -> bool:
        return not self.transitions.get(status)


J = JobStatus
B = BatchStatus

# The working steps, in the order a job runs them.
JOB_STEPS: tuple[str, ...] = (
    J.ESTIMATING,
    J.PROVISIONING,
    J.DOWNLOADING,
    J.PROCESSING,
    J.STORING,
    J.RECORDING,
    J.NOTIFY,
)

JOB = Machine(
    name="job",
    statuses=tuple(JobStatus),
    transitions={
        J.PENDING: frozenset({J.HELD, J.ESTIMATING, J.FAILED}),
        # Storing and Failed: a destructive update's review (``review.py``) decided.
        J.HELD: frozenset({J.PENDING, J.DELETED, J.STORING, J.FAILED}),
        J.ESTIMATING: frozenset({J.PROVISIONING, J.FAILED}),
        J.PROVISIONING: frozenset({J.DOWNLOADING, J.FAILED}),
        J.DOWNLOADING: frozenset({J.PROCESSING, J.FAILED}),
        # Held: a destructive update waits for a person before Storing (``review.py``).
        J.PROCESSING: frozenset({J.STORING, J.HELD, J.FAILED}),
        J.STORING: frozenset({J.RECORDING, J.FAILED}),
        J.RECORDING: frozenset({J.NOTIFY, J.FAILED}),
        J.NOTIFY: frozenset({J.COMPLETED, J.FAILED}),
        J.FAILED: frozenset({J.PENDING, *JOB_STEPS, J.DELETED}),
        J.COMPLETED: frozenset(),
        J.DELETED: frozenset(),
    },
    success={
        J.PENDING: J.ESTIMATING,
        J.HELD: J.PENDING,
        J.ESTIMATING: J.PROVISIONING,
        J.PROVISIONING: J.DOWNLOADING,
        J.DOWNLOADING: J.PROCESSING,
        J.PROCESSING: J.STORING,
        J.STORING: J.RECORDING,
        J.RECORDING: J.NOTIFY,
        J.NOTIFY: J.COMPLETED,
    },
    failed=J.FAILED,
    deleted=J.DELETED,
)

BATCH = Machine(
    name="batch",
    statuses=tuple(BatchStatus),
    transitions={
        B.PENDING: frozenset({B.HELD, B.PROCESSING}),
        B.HELD: frozenset({B.PENDING, B.DELETED}),
        B.PROCESSING: frozenset({B.REPORTING, B.FAILED}),
        B.REPORTING: frozenset({B.COMPLETED, B.FAILED}),
        B.FAILED: frozenset({B.UPDATE_REPORTING, B.DELETED}),
        B.UPDATE_REPORTING: frozenset({B.COMPLETED, B.FAILED}),
        B.COMPLETED: frozenset(),
        B.DELETED: frozenset(),
    },
    success={
        B.PENDING: B.PROCESSING,
        B.HELD: B.PENDING,
        B.PROCESSING: B.REPORTING,
        B.REPORTING: B.COMPLETED,
        B.UPDATE_REPORTING: B.COMPLETED,
    },
    failed=B.FAILED,
    deleted=B.DELETED,
)

# Statuses whose items may be physically removed by cleanup.
REMOVABLE = frozenset({"Completed", "Deleted"})

# A job whose status is one of these no longer counts as processing for its batch.
JOB_BATCH_DIR: dict[str, str] = {
    J.COMPLETED: "batch-completed",
    J.FAILED: "batch-failed",
    J.DELETED: "batch-deleted",
}
PROCESSING_DIR = "batch-processing"
BATCH_JOB_DIRS = (PROCESSING_DIR, "batch-completed", "batch-failed", "batch-deleted")


def batch_dir_for(job_status: str) -> str:
    """The batch directory that references a job in this status (Held counts as processing)."""
    return JOB_BATCH_DIR.get(job_status, PROCESSING_DIR)


def next_last_successful(old: str, new: str, last_successful: str | None) -> str | None:
    """The ``last_successful_status`` after a move, per the rules of zk-tree.md."""
    if old == J.HELD and new == J.FAILED and last_successful == J.PROCESSING:
        # Held after Processing is a destructive update never approved (``core.review``):
        # its resume, here and by Merritt's admin requeue, must run Processing again, not
        # Storing, where Merritt's storage would store what nobody approved.
        return J.DOWNLOADING
    if new == old or new in (J.FAILED, J.DELETED) or old in (J.FAILED, J.DELETED):
        return last_successful
    if old == J.HELD and new == J.STORING:
        # An approved update goes on from the step it passed: Processing, not Held.
        return last_successful
    return old


# The last successful statuses that say how far a failed job got, and the step it
# restarts at after each (Held: it failed while Pending).
RESUMES_AFTER = {
    last: step for last, step in JOB.success.items() if step in (J.PENDING, *JOB_STEPS)
}


def resume_known(last_successful: str | None) -> bool:
    """Whether ``last_successful_status`` says which step a failed job can restart at.

    MerrittZK writes the status a job left on any move (``Failed`` after a requeue) and
    other tools may write anything; such a value does not say how far the job got.
    """
    return last_successful in RESUMES_AFTER


def resume_target(last_successful: str | None) -> str:
    """Where a failed job restarts by default: the step after its last successful one,
    or Pending when that is unknown."""
    return RESUMES_AFTER.get(last_successful or "", J.PENDING)


def resume_choices(last_successful: str | None) -> tuple[str, ...]:
    """States a failed job may be resumed to: its default target or any earlier step.

    The run (``store.edits.resume_step``) and the confirmation page both ask this, so the
    page offers exactly what the run accepts.
    """
    target = resume_target(last_successful)
    if target == J.PENDING:
        return (J.PENDING,)
    return (J.PENDING, *JOB_STEPS[: JOB_STEPS.index(target) + 1])


def resume_note(last_successful: str | None) -> str:
    """Why a job restarts from Pending although it has a last successful status ("" if not)."""
    if not last_successful or resume_known(last_successful):
        return ""
    return (
        f"its last successful status is {last_successful!r}, which does not say how far it "
        "got (Merritt records the status a job left), so it can only restart from Pending"
    )
