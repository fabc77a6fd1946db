"""Jobs in the store: locking, moves between states, and the data a step writes."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import NoNodeError

from .. import history as h
from .. import parking
from .. import tree as t
from ..errors import (
    ChangedUnderYou,
    InvalidData,
    InvalidTransition,
    LockLost,
    NotFound,
    QueueError,
)
from ..records import (
    ItemLock,
    JobRecord,
    Op,
    OpKind,
    evolve,
)
from ..states import (
    JOB,
    PROCESSING_DIR,
    JobStatus,
    batch_dir_for,
    next_last_successful,
    resume_choices,
    resume_note,
    resume_target,
)
from .engine import CONNECTION_ERRORS
from .historywrites import HistoryWrites
from .locks import Locks

# One logger for all of the store, whichever part of it speaks.
log = logging.getLogger("merritt_queue.core.store")


class JobMoves(HistoryWrites, Locks):
    """Job moves of ``QueueStore``."""

    def acquire_job(self, status: str) -> JobRecord | None:
        """Lock the first unlocked job of ``status`` (priority, then FIFO).

        The job is re-read under the lock; an index entry whose job is in
        another status is skipped (and left for the consistency check).
        """
        for priority, jid in self.jobs_in_state(status):
            try:
                job = self.lock_job(jid)
            except InvalidData as e:  # leave a damaged job to check_tree, serve the others
                log.error("skipping %s: %s", jid, e)
                continue
            if job is None:
                continue
            if job.status == status and job.priority == priority:
                return job
            log.warning(
                "index %s/%02d-%s disagrees with job status %s", status, priority, jid, job.status
            )
            self.unlock_job(job)
        return None

    def lock_job(self, jid: str) -> JobRecord | None:
        """Take the job's ephemeral lock and read the job; None when someone else holds it.

        The read goes out behind the lock's create, not after its answer: ZooKeeper serves
        a session's requests in order, so it reads the job under the lock, and is dropped
        when the lock was not ours.
        """
        t.check_id(t.JOB_PREFIX, jid)
        path = t.job_node(jid, "lock")
        sent = self._send_lock(path)
        read = self._send_job_read(jid)
        if not self._lock_taken(path, sent):
            if not self._take_parked(path):
                return None
            read = self._send_job_read(jid)
        # Read under the lock, the job holds whatever this store wrote in an earlier step
        # that never reached its status write; one process's store lives through many.
        self._data_written.pop(jid, None)
        self._rechecked.pop(jid, None)
        try:
            return evolve(self._job_from_read(jid, read, True), lock_session=self.session_id)
        except NotFound:
            self._unlock(t.job_node(jid, "lock"))
            return None
        except BaseException:
            self._unlock(t.job_node(jid, "lock"))
            raise

    def still_ours(self, job: JobRecord) -> bool:
        """Whether ``job`` is still at its status version and locked by this session.

        For a worker going on to the job's next step under its lock. After a commit that
        kept the lock, the status was read with it (``Engine.commit_and_stat``): no wait;
        else one round trip. The status version alone answers while this session lives:
        the lock is ephemeral and only a status write (a force-fail) removes it otherwise.
        When not, the lock is dropped if this session still holds it, and only then: after
        an admin's force-fail it may be another worker's.
        """
        status = self._rechecked.pop(job.jid, None)
        if status is None:
            self.stats["round_trips"] += 1
            status = self.engine.stat(t.job_node(job.jid, "status"))
        same_session = self.session_id == job.lock_session
        if same_session and status is not None and status.version == job.status_version:
            return True
        lock = self.client.exists(t.job_node(job.jid, "lock"))
        if same_session and lock is not None and lock.ephemeralOwner == self.session_id:
            self._unlock(t.job_node(job.jid, "lock"))
        return False

    def _take_parked(self, path: str) -> bool:
        """Turn a parked lock (``parking``) into this session's lock; False when the lock
        is a live one, or another worker took it over first."""
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return False
        if not parking.is_parked(data, stat.ephemeralOwner):
            return False
        try:
            self.engine.commit(parking.take_over_ops(path, stat.version), f"lock {path}")
        except QueueError:
            return False
        except CONNECTION_ERRORS:
            self._orphan(path)  # perhaps taken, its answer lost: released once ZooKeeper answers
            raise
        return True

    def unlock_job(self, job: JobRecord | str) -> None:
        """Drop this session's lock; a job of ours left in Storing or Recording keeps a
        parked lock instead, in the same multi (``parking``)."""
        jid = job if isinstance(job, str) else job.jid
        path = t.job_node(jid, "lock")
        parks = isinstance(job, JobRecord) and parking.parks(job.configuration, job.status)
        if not (parks and self._park(path)):
            self._unlock(path)

    def _park(self, path: str) -> bool:
        """Turn this session's lock into a parked one; False when it is not ours or
        ZooKeeper does not answer (then ``_unlock`` releases it once it does)."""
        try:
            lock = self.client.exists(path)
            if lock is None or lock.ephemeralOwner != self.session_id:
                return False
            ops = [Op(OpKind.DELETE, path, version=lock.version), parking.park_op(path)]
            self.engine.commit(ops, f"lock {path}")
        except (QueueError, *CONNECTION_ERRORS):
            return False
        return True

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
    ) -> JobRecord:
        """Move a job to ``new`` in one multi (status, index entry, batch reference, lock).

        ``keep_lock``: the caller holds the job's lock and goes on to the next step under
        it; the multi checks the lock is still there instead of deleting it.
        ``data``: data nodes (``space_needed`` and ``JOB_OPTIONAL_NODES``) written in the
        same multi, so a step's results cost no write of their own. ``unlock``: item locks
        the step held, deleted in the same multi (one already gone is no error).
        """
        if isinstance(job, str):
            job = self.get_job(job)
        record, moves = self._plan_move(job, new, message, retry)
        moves = moves + [Op(OpKind.DELETE, lock.path, tolerant=True) for lock in unlock]
        return self._write_status(
            job, record, moves, release_lock=release_lock, keep_lock=keep_lock, data=data
        )

    def _plan_move(self, job: JobRecord, new: str, message: str, retry: bool):
        """The status record and the index moves of moving ``job`` to ``new``; checks the move."""
        JOB.check_move(job.status, new, f"job {job.jid}")
        record = t.job_status_record(
            new,
            next_last_successful(job.status, new, job.last_successful_status),
            job.retry_count + (1 if retry else 0),
            message,
        )
        return record, self._move_ops(job, t.job_index(new, job.priority, job.jid), new)

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
                record, ops = self._plan_move(job, new, message, retry)
            except QueueError as e:
                out.append(e)
                continue
            plans.append((len(out), job, record, ops))
            out.append(None)
        # Partial records (``job_heads``) carry no history: all of theirs in one round.
        read = self._read_histories(
            t.job_node(job.jid, h.NODE) for _, job, _, _ in plans if job.history is None
        )
        planned, batches = [], []
        for i, job, record, ops in plans:
            status_op = Op(
                OpKind.SET, t.job_node(job.jid, "status"), t.encode_json(record), job.status_version
            )
            old = job.history if job.history is not None else read[t.job_node(job.jid, h.NODE)]
            history_op, history = self._job_history_op(
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
                out[i] = self._written(
                    job, record, result[0].version, release_lock=False, history=history
                )
        return out  # type: ignore[return-value]

    def note_job(self, job: JobRecord, message: str, *, release_lock: bool = False) -> JobRecord:
        """Replace the message of a job that stays where it is (e.g. waiting for disk space).

        Not a move: the status, index entries and ``last_successful_status`` stay;
        the write is checked on the status version and may drop the lock with it.
        """
        record = t.job_status_record(
            job.status, job.last_successful_status, job.retry_count, message
        )
        return self._write_status(job, record, [], release_lock=release_lock)

    def force_fail(self, job: JobRecord | str, message: str) -> JobRecord:
        """Fail a job whatever holds it: its lock and its ARK's storage and inventory locks go too.

        For an admin rescuing a stuck job. The worker that held the lock, if
        alive, finds the job changed under it and commits nothing.
        """
        if isinstance(job, str):
            job = self.get_job(job)
        JOB.check_move(job.status, JobStatus.FAILED, f"job {job.jid}")
        record = t.job_status_record(
            JobStatus.FAILED, job.last_successful_status, job.retry_count, message
        )
        ops = self._move_ops(job, t.job_index(JobStatus.FAILED, job.priority, job.jid), "Failed")
        locks = [t.job_node(job.jid, "lock")]
        ark = (job.identifiers or {}).get("primary_id")
        if ark:
            locks += [t.storage_lock(ark), t.inventory_lock(ark)]
        ops += [Op(OpKind.DELETE, path, tolerant=True) for path in locks]
        failed = self._write_status(job, record, ops, release_lock=False)
        return evolve(failed, locked=False, lock_session=None)

    def _write_status(
        self,
        job: JobRecord,
        record: dict,
        extra: list[Op],
        *,
        release_lock: bool,
        keep_lock: bool = False,
        data: dict[str, Any] | None = None,
    ) -> JobRecord:
        """1. Write ``record`` to the status node at the version read, with ``extra`` ops
        (index moves, lock removals), ``data`` nodes and, when asked, the caller's lock,
        in one multi. ``keep_lock`` instead checks that the caller's lock is still there
        and keeps it.
        2. Tell the listeners, and return the job as written (with the data nodes this
        store wrote since reading it).
        """
        what = f"job {job.jid}"
        old = self._history_of(t.job_node(job.jid, h.NODE), job.history)
        history_op, history = self._job_history_op(
            job.jid, old, job.status_version + 1, job.status, record
        )
        ops = [
            Op(OpKind.SET, t.job_node(job.jid, "status"), t.encode_json(record), job.status_version)
        ]
        ops += [history_op, *extra]
        if release_lock or keep_lock:
            self._check_session(job, what)
            lock = t.job_node(job.jid, "lock")
            ops.append(Op(OpKind.DELETE, lock) if release_lock else Op(OpKind.CHECK, lock))
            if release_lock and parking.parks(job.configuration, record["status"]):
                ops.append(parking.park_op(lock))
        elif record["status"] != job.status and parking.parks(job.configuration, record["status"]):
            ops.append(parking.park_op(t.job_node(job.jid, "lock")))  # an admin's resume
        data_ops = self._data_ops(job, data or {})
        self._rechecked.pop(job.jid, None)
        try:
            if keep_lock:  # the caller goes on under the lock: it will ask ``still_ours``
                results, after = self.engine.commit_and_stat(
                    ops + data_ops, what, t.job_node(job.jid, "status")
                )
                if after is not None:
                    if len(self._rechecked) > 1000:  # stats nobody asked for (a step raised)
                        self._rechecked.clear()
                    self._rechecked[job.jid] = after
            else:
                results = self.engine.commit(ops + data_ops, what)
        except QueueError as e:
            if not data_ops or isinstance(e, ChangedUnderYou | LockLost):
                raise
            # An optional node there or not, unlike the record said: one write each, as
            # ``save_job_data`` does, then the move alone.
            for name, value in (data or {}).items():
                self._write_data(job.jid, name, value, exists=True)
            results = self.engine.commit(ops, what)
        return self._written(
            job,
            record,
            results[0].version,
            release_lock=release_lock,
            data=data,
            history=history,
        )

    def _data_ops(self, job: JobRecord, data: dict[str, Any]) -> list[Op]:
        ops = []
        for name, value in data.items():
            path, encoded = self._data_node(job.jid, name, value)
            exists = name == "space_needed" or getattr(job, name) is not None
            ops.append(
                Op(OpKind.SET, path, encoded) if exists else Op(OpKind.CREATE, path, encoded)
            )
        return ops

    def _data_node(self, jid: str, name: str, value: Any) -> tuple[str, bytes]:
        if name == "space_needed":
            if not isinstance(value, int):
                raise InvalidData(f"space_needed must be a whole number, not {value!r}")
            if value < 0:
                raise InvalidData(f"space_needed must not be negative, not {value}")
            return t.job_node(jid, name), t.encode_int(value)
        if name not in t.JOB_OPTIONAL_NODES:
            raise InvalidData(f"{name!r} is not one of {', '.join(t.JOB_OPTIONAL_NODES)}")
        return t.job_node(jid, name), t.encode_json(value)

    def _written(
        self,
        job: JobRecord,
        record: dict,
        version: int,
        *,
        release_lock: bool,
        history: h.History,
        data=None,
    ):
        """The job as a status write left it; tells the listeners."""
        written = evolve(
            job,
            history=history,
            **(self._data_written.pop(job.jid, {}) | (data or {})),
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

    def _move_ops(self, job: JobRecord, new_index: str, new_status: str) -> list[Op]:
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

    def fail_job(
        self, job: JobRecord | str, message: str, *, release_lock: bool = False
    ) -> JobRecord:
        return self.transition_job(job, JobStatus.FAILED, message, release_lock=release_lock)

    def succeed_job(
        self,
        job: JobRecord,
        message: str = "",
        *,
        release_lock: bool = True,
        keep_lock=False,
        data: dict[str, Any] | None = None,
        unlock: Sequence[ItemLock] = (),
    ) -> JobRecord:
        return self.transition_job(
            job,
            JOB.success_of(job.status),
            message,
            release_lock=release_lock and not keep_lock,
            keep_lock=keep_lock,
            data=data,
            unlock=unlock,
        )

    def set_priority(self, job: JobRecord | str, priority: int) -> JobRecord:
        """Change a job's priority, moving its index entry within its state directory."""
        if isinstance(job, str):
            job = self.get_job(job)
        t.check_priority(priority)
        if priority == job.priority:
            return job
        moved = evolve(job, priority=priority)
        # The status is rewritten as read, not just checked: its version moves on, so a
        # worker still holding the old record is refused instead of committing a move
        # that re-creates the index entry at the old priority.
        status = job.status_json()
        old = self._history_of(t.job_node(job.jid, h.NODE), job.history)
        # Its entry says what changed, and when: the status it rewrites says neither.
        told = status | {
            "message": f"priority {job.priority} -> {priority}",
            "last_modified": t.now(),
        }
        history_op, history = self._job_history_op(
            job.jid, old, job.status_version + 1, job.status, told
        )
        ops = [
            Op(
                OpKind.SET, t.job_node(job.jid, "status"), t.encode_json(status), job.status_version
            ),
            history_op,
            Op(OpKind.SET, t.job_node(job.jid, "priority"), t.encode_int(priority)),
            Op(OpKind.DELETE, job.index_path, tolerant=True),
            Op(OpKind.CREATE, moved.index_path, tolerant=True),
        ]
        results = self.engine.commit(ops, f"job {job.jid} priority")
        moved = evolve(moved, status_version=results[0].version, history=history)
        self.changes.changed("job", job.jid, job.status, moved)
        return moved

    def set_space_needed(self, jid: str, space_needed: int) -> None:
        self._write_data(jid, "space_needed", space_needed)

    def save_job_data(
        self, jid: str, name: str, value: dict | None, *, exists: bool = True
    ) -> None:
        """Write ``identifiers``, ``metadata``, ``inventory`` or ``store`` at once.

        ``exists`` is the caller's guess whether the node is there (the job record it
        holds tells); a wrong guess costs one more write, never a wrong result.
        """
        if name not in t.JOB_OPTIONAL_NODES:
            raise InvalidData(f"{name!r} is not one of {', '.join(t.JOB_OPTIONAL_NODES)}")
        self._write_data(jid, name, value, exists=exists)

    def _write_data(self, jid: str, name: str, value: Any, *, exists: bool = True) -> None:
        path, encoded = self._data_node(jid, name, value)
        self.engine.put(path, encoded, f"job {jid}", exists=exists)
        self._data_changed(jid, name, value)

    def _data_changed(self, jid: str, name: str, value: Any) -> None:
        if len(self._data_written) > 1000:  # a store that writes data of jobs it never moves
            self._data_written.clear()
        self._data_written.setdefault(jid, {})[name] = value
        self.changes.changed("job", jid, None, data={name: value})

    def hold_job(self, jid: str, message: str = "") -> JobRecord:
        return self.transition_job(jid, JobStatus.HELD, message)

    def release_job(self, jid: str, message: str = "") -> JobRecord:
        return self.transition_job(jid, JobStatus.PENDING, message)

    def delete_job(self, jid: str, message: str = "") -> JobRecord:
        return self.transition_job(jid, JobStatus.DELETED, message)

    def resume_job(
        self, job: JobRecord | str, to: str | None = None, message: str = ""
    ) -> JobRecord:
        """Restart a failed job at the step after its last successful one, or earlier."""
        if isinstance(job, str):
            job = self.get_job(job)
        return self.transition_job(job, self.resume_step(job, to), message, retry=True)

    @staticmethod
    def resume_step(job: JobRecord, to: str | None = None) -> str:
        """Where a failed job restarts: ``to`` if allowed, else after its last successful step."""
        if job.status != JobStatus.FAILED:
            raise InvalidTransition(
                f"job {job.jid}: only a Failed job can be resumed, it is {job.status}"
            )
        target = to or resume_target(job.last_successful_status)
        allowed = resume_choices(job.last_successful_status)
        if target not in allowed:
            why = resume_note(job.last_successful_status) or (
                f"its last successful step was {job.last_successful_status or 'none'}"
            )
            raise InvalidTransition(
                f"job {job.jid}: cannot resume at {target}; {why}, so it may resume at "
                f"{', '.join(allowed)}"
            )
        return target
