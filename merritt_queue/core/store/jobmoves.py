"""Job moves between states: each one ZooKeeper multi.

Guarantee: a move writes the status at the version read, with the job's index entry,
its batch's reference, its history entry and (when asked) the caller's lock, in one
multi. The tree is never half-moved, and of two writers racing from the same version
exactly one wins; the other gets ``ChangedUnderYou`` and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import history as h
from .. import parking
from .. import tree as t
from ..errors import ChangedUnderYou, LockLost, QueueError
from ..records import ItemLock, JobRecord, Op, OpKind, evolve
from ..states import JOB, PROCESSING_DIR, JobStatus, batch_dir_for, next_last_successful
from .historywrites import History
from .jobdata import JobData
from .jobs import Jobs
from .shared import Shared
from .stepwrites import Steps


def plan_move(job: JobRecord, new: str, message: str, retry: bool):
    """The status record and the index moves of moving ``job`` to ``new``; checks the move."""
    JOB.check_move(job.status, new, f"job {job.jid}")
    record = t.job_status_record(
        new,
        next_last_successful(job.status, new, job.last_successful_status),
        job.retry_count + (1 if retry else 0),
        message,
    )
    return record, move_ops(job, t.job_index(new, job.priority, job.jid), new)


def move_ops(job: JobRecord, new_index: str, new_status: str) -> list[Op]:
    ops: list[Op] = []
    old_index = job.index_path
    if old_index != new_index:
        ops += [
            Op(OpKind.DELETE, old_index, tolerant=True),
            Op(OpKind.CREATE, new_index, tolerant=True),
        ]
    if job.bid and batch_dir_for(job.status) != batch_dir_for(new_status):
        old_ref = t.batch_job_ref(job.bid, job.status, job.jid)
        new_ref = t.batch_job_ref(job.bid, new_status, job.jid)
        ops += [Op(OpKind.DELETE, old_ref, tolerant=True)]
        if batch_dir_for(new_status) == PROCESSING_DIR:
            # Back to work: its batch's batch-processing must still be there, at data
            # version 0. Deleting a batch writes it once (batch_sides), and batches deleted
            # before that lost it: a job of a Deleted batch is refused here either way.
            ops.append(Op(OpKind.CHECK, t.batch_job_dir(job.bid, PROCESSING_DIR), version=0))
        ops.append(Op(OpKind.CREATE, new_ref, tolerant=True))
    return ops


class JobMoves:
    """Moves and notes of jobs."""

    def __init__(self, shared: Shared, jobs: Jobs, data: JobData, history: History, steps: Steps):
        self.steps = steps
        self.engine = shared.engine
        self.changes = shared.changes
        self.session = shared.session
        self.data_written = shared.data_written
        self.rechecked = shared.rechecked
        self.jobs = jobs
        self.data = data
        self.history = history

    def transition_job(
        self,
        job: JobRecord | str,
        new: str,
        message: str = "",
        *,
        release_lock: bool = False,
        retry: bool = False,
        keep_lock: bool = False,
        data: dict[str, Any] | None = None,
        unlock: Sequence[ItemLock] = (),
        steps: dict[str, Any] | None = None,
    ) -> JobRecord:
        """Move a job to ``new`` in one multi (status, index entry, batch reference, lock).

        ``keep_lock``: the caller holds the job's lock and goes on to the next step under
        it; the multi checks the lock is still there instead of deleting it.
        ``data``: data nodes (``space_needed`` and ``JOB_OPTIONAL_NODES``) written in the
        same multi, so a step's results cost no write of their own. ``unlock``: item locks
        the step held, deleted in the same multi (one already gone is no error).
        ``steps``: the summary of the attempt that made the move, appended to the job's
        ``steps`` node in the same multi (``stepwrites``).
        """
        if isinstance(job, str):
            job = self.jobs.get_job(job)
        record, moves = plan_move(job, new, message, retry)
        moves = moves + [Op(OpKind.DELETE, lock.path, tolerant=True) for lock in unlock]
        return self._write_status(
            job,
            record,
            moves,
            release_lock=release_lock,
            keep_lock=keep_lock,
            data=data,
            steps=steps,
        )

    def fail_job(
        self,
        job: JobRecord | str,
        message: str,
        *,
        release_lock: bool = False,
        steps: dict[str, Any] | None = None,
    ) -> JobRecord:
        return self.transition_job(
            job, JobStatus.FAILED, message, release_lock=release_lock, steps=steps
        )

    def succeed_job(
        self,
        job: JobRecord,
        message: str = "",
        *,
        release_lock: bool = True,
        keep_lock=False,
        data: dict[str, Any] | None = None,
        unlock: Sequence[ItemLock] = (),
        steps: dict[str, Any] | None = None,
    ) -> JobRecord:
        return self.transition_job(
            job,
            JOB.success_of(job.status),
            message,
            release_lock=release_lock and not keep_lock,
            keep_lock=keep_lock,
            data=data,
            unlock=unlock,
            steps=steps,
        )

    def hold_job(self, jid: str, message: str = "") -> JobRecord:
        return self.transition_job(jid, JobStatus.HELD, message)

    def release_job(self, jid: str, message: str = "") -> JobRecord:
        return self.transition_job(jid, JobStatus.PENDING, message)

    def delete_job(self, jid: str, message: str = "") -> JobRecord:
        return self.transition_job(jid, JobStatus.DELETED, message)

    def note_job(
        self,
        job: JobRecord,
        message: str,
        *,
        release_lock: bool = False,
        steps: dict[str, Any] | None = None,
    ) -> JobRecord:
        """Replace the message of a job that stays where it is (e.g. waiting for disk space).

        Not a move: the status, index entries and ``last_successful_status`` stay;
        the write is checked on the status version and may drop the lock with it.
        """
        record = t.job_status_record(
            job.status, job.last_successful_status, job.retry_count, message
        )
        return self._write_status(job, record, [], release_lock=release_lock, steps=steps)

    def force_fail(self, job: JobRecord | str, message: str) -> JobRecord:
        """Fail a job whatever holds it: its lock and its ARK's storage and inventory locks go too.

        For an admin rescuing a stuck job. The worker that held the lock, if
        alive, finds the job changed under it and commits nothing.
        """
        if isinstance(job, str):
            job = self.jobs.get_job(job)
        JOB.check_move(job.status, JobStatus.FAILED, f"job {job.jid}")
        record = t.job_status_record(
            JobStatus.FAILED, job.last_successful_status, job.retry_count, message
        )
        ops = move_ops(job, t.job_index(JobStatus.FAILED, job.priority, job.jid), "Failed")
        locks = [t.job_node(job.jid, "lock")]
        ark = (job.identifiers or {}).get("primary_id")
        if ark:
            locks += [t.storage_lock(ark), t.inventory_lock(ark)]
        ops += [Op(OpKind.DELETE, path, tolerant=True) for path in locks]
        failed = self._write_status(job, record, ops, release_lock=False)
        return evolve(failed, locked=False, lock_session=None)

    def move_jobs(
        self, moves: Sequence[tuple[JobRecord, str, str, bool]]
    ) -> list[JobRecord | QueueError]:
        """Move many jobs ``(job, new status, message, retry)``, each in its own multi.

        Each move is exactly what ``transition_job`` writes (checked on the status
        version read, all or nothing) but the multis are pipelined, so a bulk action
        waits one round trip per chunk instead of one per job. Returns, in order, the
        job as written or the error that refused its move (nothing written for it).
        """
        out: list[JobRecord | QueueError | None] = []
        plans = []
        for job, new, message, retry in moves:
            try:
                record, ops = plan_move(job, new, message, retry)
            except QueueError as e:
                out.append(e)
                continue
            plans.append((len(out), job, record, ops))
            out.append(None)
        # Partial records (``job_heads``) carry no history: all of theirs in one round.
        read = self.history.read(
            t.job_node(job.jid, h.NODE) for _, job, _, _ in plans if job.history is None
        )
        planned, batches = [], []
        for i, job, record, ops in plans:
            status_op = Op(
                OpKind.SET, t.job_node(job.jid, "status"), t.encode_json(record), job.status_version
            )
            old = job.history if job.history is not None else read[t.job_node(job.jid, h.NODE)]
            history_op, history = self.history.job_op(
                job.jid, old, job.status_version + 1, job.status, record
            )
            planned.append((i, job, record, history))
            batches.append(([status_op, history_op, *ops], f"job {job.jid}"))
        for (i, job, record, history), result in zip(
            planned, self.engine.commit_many(batches), strict=True
        ):
            if isinstance(result, QueueError):
                out[i] = result
            else:
                out[i] = self.written(
                    job, record, result[0].version, release_lock=False, history=history
                )
        return out  # type: ignore[return-value]

    def _write_status(
        self,
        job: JobRecord,
        record: dict,
        extra: list[Op],
        *,
        release_lock: bool,
        keep_lock: bool = False,
        data: dict[str, Any] | None = None,
        steps: dict[str, Any] | None = None,
    ) -> JobRecord:
        """1. Write ``record`` to the status node at the version read, with ``extra`` ops
        (index moves, lock removals), ``data`` nodes and, when asked, the caller's lock,
        in one multi. ``keep_lock`` instead checks that the caller's lock is still there
        and keeps it.
        2. Tell the listeners, and return the job as written (with the data nodes this
        store wrote since reading it).
        """
        what = f"job {job.jid}"
        old = self.history.of(t.job_node(job.jid, h.NODE), job.history)
        history_op, history = self.history.job_op(
            job.jid, old, job.status_version + 1, job.status, record
        )
        ops = [
            Op(OpKind.SET, t.job_node(job.jid, "status"), t.encode_json(record), job.status_version)
        ]
        ops += [history_op, *extra]
        written_steps = None
        if steps is not None:
            steps_op, written_steps = self.steps.op(job, steps)
            ops.append(steps_op)
        if release_lock or keep_lock:
            self.session.check(job, what)
            lock = t.job_node(job.jid, "lock")
            ops.append(Op(OpKind.DELETE, lock) if release_lock else Op(OpKind.CHECK, lock))
            if release_lock and parking.parks(job.configuration, record["status"]):
                ops.append(parking.park_op(lock))
        elif record["status"] != job.status and parking.parks(job.configuration, record["status"]):
            ops.append(parking.park_op(t.job_node(job.jid, "lock")))  # an admin's resume
        data_ops = self.data.ops(job, data or {})
        self.rechecked.pop(job.jid, None)
        try:
            if keep_lock:  # the caller goes on under the lock: it will ask ``still_ours``
                results, after = self.engine.commit_and_stat(
                    ops + data_ops, what, t.job_node(job.jid, "status")
                )
                if after is not None:
                    if len(self.rechecked) > 1000:  # stats nobody asked for (a step raised)
                        self.rechecked.clear()
                    self.rechecked[job.jid] = after
            else:
                results = self.engine.commit(ops + data_ops, what)
        except QueueError as e:
            if not data_ops or isinstance(e, ChangedUnderYou | LockLost):
                raise
            # An optional node there or not, unlike the record said: one write each, as
            # ``save_job_data`` does, then the move alone.
            for name, value in (data or {}).items():
                self.data.write(job.jid, name, value, exists=True)
            results = self.engine.commit(ops, what)
        return self.written(
            job,
            record,
            results[0].version,
            release_lock=release_lock,
            data=data,
            history=history,
            steps=written_steps,
        )

    def written(
        self,
        job: JobRecord,
        record: dict,
        version: int,
        *,
        release_lock: bool,
        history: h.History,
        data=None,
        steps=None,
    ):
        """The job as a status write left it; tells the listeners."""
        written = evolve(
            job,
            history=history,
            steps=steps if steps is not None else job.steps,
            **(self.data_written.pop(job.jid, {}) | (data or {})),
            status=record["status"],
            last_successful_status=record["last_successful_status"],
            retry_count=record["retry_count"],
            message=record["message"],
            last_modified=record["last_modified"],
            status_version=version,
            locked=job.locked and not release_lock,
            lock_session=None if release_lock else job.lock_session,
        )
        self.changes.changed("job", job.jid, job.status, written)
        return written
