"""A failed job's per-job parameters edited and the job resumed, in one multi."""

from __future__ import annotations

from .. import history as h
from .. import jobparams
from .. import tree as t
from ..errors import InvalidData, InvalidTransition
from ..records import JobRecord, Op, OpKind, evolve
from ..states import JobStatus
from .jobmoves import JobMoves
from .jobs import MAX_JOB_DATA_BYTES


class JobEdits(JobMoves):
    """Edits of ``QueueStore``."""

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
        allowed = jobparams.resume_steps(job.last_successful_status, list(changes))
        target = to or jobparams.default_step(job.last_successful_status, list(changes))
        if target not in allowed:
            latest = jobparams.latest_step(list(changes))
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
        record, moves = self._plan_move(job, target, message, retry=True)
        old = self._history_of(t.job_node(job.jid, h.NODE), job.history)
        history_op, history = self._job_history_op(
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
        return self._written(
            edited, record, results[0].version, release_lock=False, history=history
        )
