"""Batches in the store: creation, reads, acquisition, reporting and moves."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, cast

from .. import batch_sides
from .. import history as h
from .. import multiread as mr
from .. import tree as t
from ..errors import (
    ChangedUnderYou,
    InvalidData,
    NotFound,
    QueueError,
)
from ..records import (
    BatchRecord,
    Created,
    Op,
    OpKind,
    evolve,
)
from ..states import (
    BATCH,
    BATCH_JOB_DIRS,
    BatchStatus,
)
from .historywrites import HistoryWrites, decode_node
from .locks import Locks

if TYPE_CHECKING:
    from . import QueueStore

# Ids tried by one creation while others keep taking the next one first.
CREATE_TRIES = 50
# Job ids kept in a status report: about 3.3 KB, however big the batch.
STATUS_REPORT_MAX_JIDS = 200


def _acquired_after(batch: BatchRecord, extra: list[Op]) -> bool:
    """Whether the batch has ``states`` once ``extra`` is written with its move."""
    for op in extra:
        if op.path == t.batch_states(batch.bid):
            return op.kind == OpKind.CREATE
    return batch.acquired


class BatchStore(HistoryWrites, Locks):
    """Batch operations of ``QueueStore``."""

    def create_batch(self, submission: dict, *, reserved: bool = False) -> Created:
        """Create a Pending batch in one multi; the same ``batchID`` again returns the existing one.

        Without ``reserved`` the tree is exactly MerrittZK's fresh batch. ``reserved``
        also creates ``states`` in the same multi: MerrittZK takes a batch with no
        ``states`` as Pending, so it never acquires one this project submitted.

        The batch node is created in the multi that writes its submission, status and
        ``states``: a batch node alone would be one MerrittZK's pickup locks, fails to load
        and keeps locked for the life of its process. A multi cannot name a child after a
        sequential create of the same multi, so the id is the one ZooKeeper's sequential
        create would give (``_next_batch_id``), created as a plain node: a sequential create
        by anyone else meanwhile takes that name or the next, never a used one.

        1. A known ``batchID`` returns its batch, flagged as a duplicate.
        2. One multi writes the batch node, submission, status and the uuid entry; if
           another creator took the id meanwhile, the next one is tried; if another
           submitter won the uuid, theirs is returned as the duplicate.
        """
        if not isinstance(submission, dict):
            raise InvalidData("a submission must be a JSON object")
        uuid = submission.get("batchID")
        if uuid:
            existing = self.find_batch_by_uuid(uuid)
            if existing:
                return Created(existing, duplicate=True)
        data = t.encode_json(submission)
        status = t.batch_status_record(BatchStatus.PENDING)
        floor = 0
        for _ in range(CREATE_TRIES):
            bid = self._next_batch_id(floor)
            ops = [
                Op(OpKind.CREATE, t.batch_path(bid)),
                Op(OpKind.CREATE, t.batch_node(bid, "submission"), data),
                Op(OpKind.CREATE, t.batch_node(bid, "status"), t.encode_json(status)),
                self._batch_history_op(bid, h.ABSENT, 0, "", status)[0],
            ]
            if reserved:
                ops.append(Op(OpKind.CREATE, t.batch_states(bid)))
            if uuid:
                ops.append(Op(OpKind.CREATE, t.batch_uuid_path(uuid), t.encode_str(bid)))
            try:
                self.engine.commit(ops, f"create batch {bid}")
            except QueueError:
                winner = self.find_batch_by_uuid(uuid) if uuid else None
                if winner:
                    return Created(winner, duplicate=True)
                if self.engine.exists(t.batch_path(bid)) is None:
                    raise
                floor = int(bid[len(t.BATCH_PREFIX) :]) + 1
                self.engine.client.sync(t.BATCHES)  # a lagging server's cversion, caught up
                continue
            self.changes.changed("batch", bid, None)
            return Created(bid)
        raise QueueError(
            f"no batch was created: other creators kept taking the next id ({CREATE_TRIES} "
            "tries); nothing was written, submit again"
        )

    def _next_batch_id(self, floor: int) -> str:
        """The name a sequential create under ``/batches`` would take now: ZooKeeper numbers
        it with the parent's child version (``cversion``), which every child create and
        delete raises; at least ``floor``, past an id seen taken."""
        stat = self.engine.exists(t.BATCHES)
        if stat is None:
            raise NotFound(f"{t.BATCHES} does not exist")
        return f"{t.BATCH_PREFIX}{max(stat.cversion, floor):010d}"

    def find_batch_by_uuid(self, uuid: str) -> str | None:
        got = self.engine.get_many([t.batch_uuid_path(uuid)])[t.batch_uuid_path(uuid)]
        return t.decode_str(got[0]) if got else None

    def get_batch(self, bid: str) -> BatchRecord:
        t.check_id(t.BATCH_PREFIX, bid)
        # The history after the status: see ``history`` for why the order matters.
        names = ("submission", "status", h.NODE, "status-report", "lock")
        paths = [t.batch_node(bid, n) for n in names]
        got = self.engine.get_many(paths)
        status = got[paths[1]]
        if status is None:
            raise NotFound(f"batch {bid} does not exist")
        (acquired,) = self.exists_many([t.batch_states(bid)])
        return self._batch_record(
            bid,
            got[paths[0]],
            status,
            got[paths[3]],
            acquired,
            got[paths[4]],
            history=got[paths[2]],
        )

    @staticmethod
    def _batch_record(bid, submission, status, report, acquired, lock, *, history) -> BatchRecord:
        """The nodes as ``get`` returned them (None when missing), ``history`` included.

        A Deleted batch's tombstone (``batch_sides.is_tombstone``) is no lock: nobody holds it."""
        st = t.decode_json(status[0]) or {}
        locked = lock is not None and not batch_sides.is_tombstone(st.get("status", ""), lock)
        return BatchRecord(
            bid=bid,
            submission=t.decode_json(submission[0]) if submission else None,
            status=st.get("status", ""),
            last_modified=st.get("last_modified") or "",
            message=st.get("message") or "",
            status_version=status[1].version,
            acquired=acquired,
            locked=locked,
            status_report=t.decode_json(report[0]) if report else None,
            history=decode_node(history),
        )

    def batch_submissions(self, bids: Iterable[str]) -> dict[str, dict | None]:
        """The submission of each batch, in one pipelined round; None when missing."""
        bids = list(bids)
        got = self.engine.get_many(t.batch_node(b, "submission") for b in bids)
        return {
            b: t.decode_json(node[0]) if (node := got[t.batch_node(b, "submission")]) else None
            for b in bids
        }

    def list_batch_ids(self) -> list[str]:
        return sorted(c for c in self.engine.children(t.BATCHES) if t.is_batch_id(c))

    def batch_statuses(self, bids: Iterable[str] | None = None) -> dict[str, dict]:
        """Status JSON of many batches in one pipelined round (missing ones left out)."""
        bids = list(self.list_batch_ids() if bids is None else bids)
        got = self.engine.get_many(t.batch_node(b, "status") for b in bids)
        return {
            b: t.decode_json(node[0]) or {}
            for b in bids
            if (node := got[t.batch_node(b, "status")])
        }

    def acquire_pending_batch(self) -> BatchRecord | None:
        """Lock the oldest unlocked Pending batch and move it to Processing (FIFO).

        A batch of a collection on hold moves to Held instead (and is unlocked),
        and the next one is tried. Pending is read from the status, not from
        the absence of ``states``: a batch whose job creation was interrupted
        may already have it.
        """
        for bid in self.pending_batches():
            batch = self.begin_batch(bid)
            if batch is None:
                continue
            try:
                return self._move_batch(
                    batch,
                    BatchStatus.PROCESSING,
                    "",
                    release_lock=False,
                    extra=[self._states_op(bid)],
                )
            except ChangedUnderYou:
                self._unlock(t.batch_node(bid, "lock"))
        return None

    def pending_batches(self) -> list[str]:
        """Pending batches, oldest first."""
        return [
            b for b, st in self.batch_statuses().items() if st.get("status") == BatchStatus.PENDING
        ]

    def begin_batch(
        self, bid: str, runs: Callable[[dict | None], bool] | None = None
    ) -> BatchRecord | None:
        """Lock a Pending batch to turn it into jobs; None when busy, gone or no longer Pending.

        A batch of a collection on hold is moved to Held (and unlocked) instead, unless
        ``runs`` says its submission is not ours to run: then it comes back locked and
        untouched, for the caller to let go.
        """
        if not self._try_lock(t.batch_node(bid, "lock")):
            return None
        batch = self._reread_locked(bid, BatchStatus.PENDING)
        if batch is None:
            return None
        if (runs is None or runs(batch.submission)) and (msg := self.item_hold(batch.submission)):
            self.transition_batch(batch, BatchStatus.HELD, msg, release_lock=True)
            return None
        return batch

    def start_processing(
        self, batch: BatchRecord, message: str = "", *, jobs_written: bool = False
    ) -> BatchRecord:
        """Pending -> Processing once every job exists: creates ``states``, drops the lock.

        A reserved batch has ``states`` already, and so has one whose jobs were written (their
        references live under it): creating it again would cost a refused multi and a retry.
        """
        if jobs_written:
            batch = evolve(batch, acquired=True)
        return self._move_batch(
            batch,
            BatchStatus.PROCESSING,
            message,
            release_lock=True,
            extra=[] if batch.acquired else [self._states_op(batch.bid)],
        )

    @staticmethod
    def _states_op(bid: str) -> Op:
        return Op(OpKind.CREATE, t.batch_states(bid), tolerant=True)

    def acquire_batch(self, status: str) -> BatchRecord | None:
        """Lock the oldest unlocked batch in ``status`` (for handlers of that state)."""
        for bid, st in self.batch_statuses().items():
            if st.get("status") != status or not self._try_lock(t.batch_node(bid, "lock")):
                continue
            batch = self._reread_locked(bid, status)
            if batch:
                return batch
        return None

    def _reread_locked(self, bid: str, status: str) -> BatchRecord | None:
        try:
            batch = evolve(self.get_batch(bid), lock_session=self.session_id)
        except NotFound:
            batch = None
        if batch is None or batch.status != status:
            self._unlock(t.batch_node(bid, "lock"))
            return None
        return batch

    def acquire_batch_for_reporting(self) -> BatchRecord | None:
        """Lock a Processing batch whose jobs are all finished and move it to Reporting."""
        for bid in self.finished_batches(BatchStatus.PROCESSING):
            if not self._try_lock(t.batch_node(bid, "lock")):
                continue
            batch = self._reread_locked(bid, BatchStatus.PROCESSING)
            if batch is None:
                continue
            if not self.batch_is_finished(bid):
                self.unlock_batch(batch)
                continue
            try:
                return self._move_batch(batch, BatchStatus.REPORTING, "", release_lock=False)
            except ChangedUnderYou:
                self.unlock_batch(batch)
        return None

    def finished_batches(self, status: str = BatchStatus.PROCESSING) -> list[str]:
        """Batches in ``status`` whose ``batch-processing`` directory exists and is empty."""
        bids = [b for b, st in self.batch_statuses().items() if st.get("status") == status]
        dirs = self.engine.children_many(t.batch_job_dir(b, "batch-processing") for b in bids)
        return [b for b in bids if dirs[t.batch_job_dir(b, "batch-processing")] == []]

    def batch_is_finished(self, bid: str) -> bool:
        path = t.batch_job_dir(bid, "batch-processing")
        return self.engine.children_many([path])[path] == []

    def finished_batch_status(self, bid: str) -> str | None:
        """The batch's status when none of its jobs is still processing, else None: the
        processing directory's stat and the status in one round, as a worker asks after
        each job's last step. The stat counts the jobs left; a listing would carry all their
        names, a big batch's whole list again for each of its jobs."""
        processing, status = t.batch_job_dir(bid, "batch-processing"), t.batch_node(bid, "status")
        directory, node = self.engine.read([(mr.GET, processing), (mr.GET, status)])
        if directory is None or directory[1].numChildren or node is None:
            return None
        return (t.decode_json(node[0]) or {}).get("status")

    def batch_jobs(self, bid: str) -> dict[str, list[str]]:
        """Job ids by batch directory (``batch-processing``, ``batch-completed``, ...)."""
        got = self.engine.children_many(t.batch_job_dir(bid, d) for d in BATCH_JOB_DIRS)
        return {d: sorted(got[t.batch_job_dir(bid, d)] or []) for d in BATCH_JOB_DIRS}

    def write_status_report(self, bid: str, failed: list[str], successful: list[str]) -> dict:
        """Write ``/batches/BID/status-report``, its job lists cut to a bounded size.

        Whole lists grow about 16 bytes a job: a batch of some 60,000 jobs would pass
        ZooKeeper's 1 MB node limit and could never be reported. The lists keep at most
        ``STATUS_REPORT_MAX_JIDS`` ids (failed ones first); ``failed_count`` and
        ``successful_count`` give the totals, and the batch's ``states/batch-*``
        directories hold every id.
        """
        kept_failed = failed[:STATUS_REPORT_MAX_JIDS]
        kept_successful = successful[: STATUS_REPORT_MAX_JIDS - len(kept_failed)]
        report = {
            "last_modified": t.now(),
            "failed_jobs": kept_failed,
            "successful_jobs": kept_successful,
            "failed_count": len(failed),
            "successful_count": len(successful),
        }
        self.engine.put(t.batch_node(bid, "status-report"), t.encode_json(report), f"batch {bid}")
        self.changes.changed("batch", bid, None)
        return report

    def transition_batch(
        self,
        batch: BatchRecord | str,
        new: str,
        message: str = "",
        *,
        release_lock: bool = False,
        release_after: float = 0.0,
    ) -> BatchRecord:
        """Move a batch; the nodes MerrittZK reads go with the move (``batch_sides``).

        ``release_lock``: this session lets go of the batch's lock with the move, deleted in
        its multi, or ``release_after`` seconds later (the multi then checks the lock). Either
        way the moved record has it released, since nobody works on the batch meanwhile: the
        lock only keeps out a reader that acts on what it read before the move.
        """
        if isinstance(batch, str):
            batch = self.get_batch(batch)
        BATCH.check_move(batch.status, new, f"batch {batch.bid}")
        store = cast("QueueStore", self)  # the sides read what other parts of it hold
        extra = batch_sides.move_ops(store, batch, new)
        try:
            return self._move_batch(
                batch,
                new,
                message,
                release_lock=release_lock,
                release_after=release_after,
                extra=extra,
            )
        except QueueError as e:
            if new != BatchStatus.HELD:
                raise
            raise batch_sides.explain_hold(store, batch.bid, e) from None

    def _move_batch(
        self,
        batch: BatchRecord,
        new: str,
        message: str,
        *,
        release_lock: bool,
        release_after: float = 0.0,
        extra: list[Op] | None = None,
    ) -> BatchRecord:
        what = f"batch {batch.bid}"
        if new != batch.status:  # the same status: a note (``note_batch``), not a move
            BATCH.check_move(batch.status, new, what)
        record = t.batch_status_record(new, message)
        old = self._history_of(t.batch_node(batch.bid, h.NODE), batch.history)
        history_op, history = self._batch_history_op(
            batch.bid, old, batch.status_version + 1, batch.status, record
        )
        ops = [
            Op(
                OpKind.SET,
                t.batch_node(batch.bid, "status"),
                t.encode_json(record),
                batch.status_version,
            ),
            history_op,
        ]
        ops += extra or []
        lock = t.batch_node(batch.bid, "lock")
        later = release_lock and release_after > 0
        if release_lock:
            self._check_session(batch, what)
            ops.append(Op(OpKind.CHECK, lock) if later else Op(OpKind.DELETE, lock))
        results = self.engine.commit(ops, what)
        moved = evolve(
            batch,
            status=new,
            message=record["message"],
            last_modified=record["last_modified"],
            status_version=results[0].version,
            acquired=_acquired_after(batch, extra or []),
            locked=batch.locked and not release_lock,
            lock_session=None if release_lock else batch.lock_session,
            history=history,
        )
        self.changes.changed("batch", batch.bid, batch.status, moved)
        if later:
            self._unlock_after(lock, release_after)
        return moved

    def unlock_batch(self, batch: BatchRecord | str) -> None:
        bid = batch if isinstance(batch, str) else batch.bid
        self._unlock(t.batch_node(bid, "lock"))

    def lock_batch(self, bid: str) -> BatchRecord | None:
        if not self._try_lock(t.batch_node(bid, "lock")):
            return None
        return evolve(self.get_batch(bid), locked=True, lock_session=self.session_id)

    def note_batch(self, batch: BatchRecord, message: str) -> BatchRecord:
        """Replace the message of a batch that stays where it is (a Held batch a person keeps
        Held): not a move, but written like one, checked on the status version read."""
        return self._move_batch(batch, batch.status, message, release_lock=False)

    def hold_batch(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.HELD, message)

    def release_batch(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.PENDING, message)

    def delete_batch(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.DELETED, message)

    def update_reporting(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.UPDATE_REPORTING, message)
