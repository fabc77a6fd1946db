"""A failed job's way back: resumed at a step, or its parameters edited and resumed.

Guarantee: an edit and its resume are one multi checked on the status version read: a
job changed since (resumed, deleted, edited by someone else) raises ``ChangedUnderYou``
and nothing is written.
"""

from __future__ import annotations

from .. import history as h
from .. import jobparams, review
from .. import tree as t
from ..errors import InvalidData, InvalidTransition
from ..records import JobRecord, Op, OpKind, evolve
from ..states import JobStatus, resume_choices, resume_note, resume_target
from .historywrites import History
from .jobmoves import JobMoves, plan_move
from .jobs import Jobs
from .newjobs import MAX_JOB_DATA_BYTES
from .shared import Shared


class JobEdits:
    """Resumes and edits of failed jobs."""

    def __init__(self, shared: Shared, jobs: Jobs, moves: JobMoves, history: History):
        self.engine = shared.engine
        self.jobs = jobs
        self.moves = moves
        self.history = history

    def resume_job(
        self, job: JobRecord | str, to: str | None = None, message: str = ""
    ) -> JobRecord:
        """Restart a failed job at the step after its last successful one, or earlier."""
        if isinstance(job, str):
            job = self.jobs.get_job(job)
        return self.moves.transition_job(job, self.resume_step(job, to), message, retry=True)

    @staticmethod
    def resume_step(job: JobRecord, to: str | None = None) -> str:
        """Where a failed job restarts: ``to`` if allowed, else after its last successful step."""
        if job.status != JobStatus.FAILED:
            raise InvalidTransition(
                f"job {job.jid}: only a Failed job can be resumed, it is {job.status}"
            )
        allowed = _reviewed(job, resume_choices(job.last_successful_status))
        target = to or resume_target(job.last_successful_status)
        if not to and target not in allowed:
            target = allowed[-1]
        if target not in allowed:
            why = (
                review.stores(job)
                or resume_note(job.last_successful_status)
                or f"its last successful step was {job.last_successful_status or 'none'}"
            )
            raise InvalidTransition(
                f"job {job.jid}: cannot resume at {target}; {why}, so it may resume at "
                f"{', '.join(allowed)}"
            )
        return target

    def edit_job_parameters(
        self, job: JobRecord, changes: dict[str, str], *, to: str | None = None, message: str = ""
    ) -> JobRecord:
        """Write ``changes`` (``jobparams.FIELDS`` -> new value) into the failed ``job``'s
        nodes and resume it at ``to`` (default ``jobparams.default_step``), all in one
        multi checked on the status version read: a job changed since (resumed, deleted,
        edited by someone else) raises ``ChangedUnderYou`` and nothing is written.

        The history entry of the move carries ``message``; the values before and after are
        the caller's to record (the admin audit), so the node stays small.
        """
        if not changes:
            raise InvalidData(f"job {job.jid}: nothing to change")
        if job.status != JobStatus.FAILED:
            raise InvalidTransition(
                f"job {job.jid}: only a Failed job can be edited and resumed, it is {job.status}"
            )
        allowed = _reviewed(job, jobparams.resume_steps(job.last_successful_status, list(changes)))
        target = to or jobparams.default_step(job.last_successful_status, list(changes))
        if not to and allowed and target not in allowed:
            target = allowed[-1]
        if target not in allowed:
            latest = jobparams.latest_step(list(changes))
            if why := review.stores(job):
                raise InvalidTransition(
                    f"job {job.jid}: cannot resume at {target}; {why}, so it may resume at "
                    f"{', '.join(allowed)}"
                )
            raise InvalidTransition(
                f"job {job.jid}: cannot resume at {target} after this edit; what changed is "
                f"used by {latest}, so it may resume at {', '.join(allowed) or 'no step'}"
            )
        new = jobparams.edited(job.configuration, job.identifiers, job.metadata, changes)
        size = sum(
            len(t.encode_json(v))
            for v in (new.configuration, new.identifiers, new.metadata)
            if v is not None
        )
        if size > MAX_JOB_DATA_BYTES:
            raise InvalidData(
                f"job {job.jid} would hold {size} bytes of data, over the limit of "
                f"{MAX_JOB_DATA_BYTES} bytes per job; shorten its fields"
            )
        record, moves = plan_move(job, target, message, retry=True)
        old = self.history.of(t.job_node(job.jid, h.NODE), job.history)
        history_op, history = self.history.job_op(
            job.jid, old, job.status_version + 1, job.status, record
        )
        ops = [
            Op(
                OpKind.SET, t.job_node(job.jid, "status"), t.encode_json(record), job.status_version
            ),
            history_op,
            *moves,
            Op(OpKind.SET, t.job_node(job.jid, "configuration"), t.encode_json(new.configuration)),
        ]
        for name, before, after in (
            ("identifiers", job.identifiers, new.identifiers),
            ("metadata", job.metadata, new.metadata),
        ):
            if after is not None and after != before:
                kind = OpKind.SET if before is not None else OpKind.CREATE
                ops.append(Op(kind, t.job_node(job.jid, name), t.encode_json(after)))
        results = self.engine.commit(ops, f"job {job.jid}")
        edited = evolve(
            job,
            configuration=new.configuration,
            identifiers=new.identifiers,
            metadata=new.metadata,
        )
        return self.moves.written(
            edited, record, results[0].version, release_lock=False, history=history
        )


def _reviewed(job: JobRecord, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """``allowed`` without the steps past the latest one ``job``'s review lets it resume at."""
    latest = review.latest_resume(job)
    if latest is None or latest not in allowed:
        return allowed
    return allowed[: allowed.index(latest) + 1]
