"""The queue store: every operation on the canonical tree of zk-tree.md.

Guarantees:

- Every move of a batch or job is one ZooKeeper ``multi`` that checks the
  status node's version, moves the job's index entry and batch reference with
  it and, when the caller holds it, drops the lock. The tree is never
  half-moved, and of two writers racing from the same version exactly one
  wins; the other gets ``ChangedUnderYou`` and nothing is written.
- A lock is an ephemeral node: it vanishes with its holder's session. A holder
  whose session changed since it took the lock gets ``LockLost`` instead of
  committing, so a step abandoned by an expired session never commits.
- Reading never writes.
"""

from __future__ import annotations

import logging
import posixpath
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from . import batch_sides
from . import tree as t
from .changebuffer import ChangeBuffer
from .errors import (
    ChangedUnderYou,
    InvalidData,
    InvalidTransition,
    Locked,
    LockLost,
    NotFound,
    NotRemovable,
    QueueError,
)
from .itemkeys import NoProfiles, Profiles, collection_of, profile_of, with_job_id
from .pauseflag import pause_flag
from .records import (
    DEFAULT_PRIORITY,
    BatchRecord,
    Change,
    Created,
    ItemLock,
    JobRecord,
    NewJob,
    Op,
    ReleaseResult,
    evolve,
)
from .states import (
    BATCH,
    BATCH_JOB_DIRS,
    JOB,
    REMOVABLE,
    BatchStatus,
    JobStatus,
    batch_dir_for,
    next_last_successful,
    resume_choices,
    resume_note,
    resume_target,
)

log = logging.getLogger(__name__)

# ZooKeeper did not answer: the request may or may not have been applied.
CONNECTION_ERRORS = (
    ConnectionLoss,
    ConnectionClosedError,
    OperationTimeoutError,
    SessionExpiredError,
    KazooTimeoutError,
)

# Job ids kept in a status report: about 3.3 KB, however big the batch.
STATUS_REPORT_MAX_JIDS = 200

# Reads of many jobs are pipelined this many at a time: enough to hide the round trip, few
# enough that the requests in flight stay small.
READ_CHUNK = 1000
# Jobs ``create_jobs`` creates a round: ids, then the multis, pipelined.
CREATE_CHUNK = 200
# A job's nodes are written in one multi, and ZooKeeper drops the connection of a request
# over its 1 MB limit (jute.maxbuffer) instead of answering: the request is refused here
# first, far below that limit, so a job can never be a poison pill retried for ever.
MAX_JOB_DATA_BYTES = 64 * 1024
# The nodes ``job_heads`` reads: all a move needs besides the lock.
HEAD_NODES = ("status", "bid", "priority")


def _acquired_after(batch: BatchRecord, extra: list[Op]) -> bool:
    """Whether the batch has ``states`` once ``extra`` is written with its move."""
    for op in extra:
        if op.path == t.batch_states(batch.bid):
            return op.kind == "create"
    return batch.acquired


def _is_auto_dir(path: str) -> bool:
    """Index directories the store may create on demand (never an item itself)."""
    parts = path.strip("/").split("/")
    if parts[:2] == ["jobs", "states"] and len(parts) == 3:
        return True
    return (
        len(parts) in (3, 4)
        and parts[0] == "batches"
        and parts[2] == "states"
        and (len(parts) == 3 or parts[3] in BATCH_JOB_DIRS)
    )


class QueueStore:
    """All reads and writes of the queue tree over one kazoo client."""

    def __init__(self, client: KazooClient, *, actor: str = "", listeners: list | None = None):
        self.client = client
        self.stats: Counter[str] = Counter()
        # Who is writing ("worker", "admin:<user>"): recorded with each change.
        self.actor = actor
        self.listeners: list = list(listeners or [])
        # Per thread: the web app shares one store between its request threads.
        self._local = threading.local()
        # Locks this session holds but could not release while ZooKeeper was away.
        self._orphaned: set[str] = set()
        self._orphan_guard = threading.Lock()
        self._watching_state = False
        # Data nodes this store wrote since it last wrote the job's status: a handler
        # writes them mid-step, and the record its commit returns (and tells the
        # listeners) must carry them, not the values read before the step.
        self._data_written: dict[str, dict[str, Any]] = {}
        # Which collection a profile ingests into: Merritt's items name only a profile,
        # and Merritt holds a collection by its profiles' names (``runtime`` sets it).
        self.profiles: Profiles = NoProfiles()

    def _changed(
        self, kind: str, item_id: str, old_status, record=None, removed=False, data=None
    ) -> None:
        """Tell the listeners; a failing listener must never fail or undo the write."""
        if not self.listeners:
            return
        change = Change(kind, item_id, old_status, record, removed, self.actor, data)
        deferred = getattr(self._local, "deferred", None)
        if deferred is not None:
            deferred.add(change)
            return
        self._tell([change])

    def _tell(self, changes: list[Change]) -> None:
        for listener in self.listeners:
            many = getattr(listener, "many", None)
            if many is not None and len(changes) > 1:
                try:
                    many(changes)
                except Exception:
                    log.exception("change listener failed for %d changes", len(changes))
                continue
            for change in changes:
                try:
                    listener(change)
                except Exception:
                    log.exception("change listener failed for %s %s", change.kind, change.id)

    @contextmanager
    def deferred_changes(self, max_delay: float | None = None) -> Iterator[None]:
        """Hold the listeners' calls until the block ends, then give them all at once.

        For bulk writes and chained steps: a listener with a ``many`` attribute (the
        mirror) then writes them in one database transaction instead of one per item.
        With ``max_delay``, no change waits longer than that many seconds (see
        ``changebuffer``); ``max_delay=0`` holds nothing back.
        """
        if max_delay == 0 or getattr(self._local, "deferred", None) is not None:
            yield  # nested: the outer block tells
            return
        buffer = ChangeBuffer(self._tell, max_delay)
        self._local.deferred = buffer
        try:
            yield
        finally:
            self._local.deferred = None
            buffer.close()

    # --- plumbing ------------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        cid = self.client.client_id
        return cid[0] if cid else None

    def _get_many(self, paths: Iterable[str]) -> dict[str, tuple[bytes, Any] | None]:
        """Read many nodes in one pipelined round; a missing node reads as None."""
        pending = [(p, self.client.get_async(p)) for p in paths]
        self.stats["round_trips"] += 1
        out: dict[str, tuple[bytes, Any] | None] = {}
        for path, result in pending:
            try:
                out[path] = result.get()
            except NoNodeError:  # optional node, or the item vanished: caller decides
                out[path] = None
        return out

    def _children(self, path: str, watch=None) -> list[str]:
        self.stats["round_trips"] += 1
        try:
            return self.client.get_children(path, watch=watch)
        except NoNodeError:  # a lazily created directory that does not exist yet is empty
            return []

    def _children_stat(self, path: str) -> tuple[list[str], Any] | None:
        """A node's children and its stat in one round; None when it is missing."""
        self.stats["round_trips"] += 1
        try:
            return self.client.get_children(path, include_data=True)
        except NoNodeError:
            return None

    def children_many(
        self, paths: Iterable[str], watches: Mapping[str, Callable] | None = None
    ) -> dict[str, list[str] | None]:
        """Children of many nodes in one pipelined round; a missing node gives None.
        ``watches``: a one-shot watch to arm on some of them, by path."""
        watches = watches or {}
        pending = [(p, self.client.get_children_async(p, watch=watches.get(p))) for p in paths]
        self.stats["round_trips"] += 1
        out: dict[str, list[str] | None] = {}
        for path, result in pending:
            try:
                out[path] = result.get()
            except NoNodeError:  # caller tells "missing" from "empty"
                out[path] = None
        return out

    def watch_nodes(self, watches: Mapping[str, Callable]) -> None:
        """Arm a one-shot watch on each node (path: watcher), in one pipelined round: it
        fires when the node changes, is created or is deleted."""
        if not watches:
            return
        pending = [self.client.exists_async(p, watch=fn) for p, fn in watches.items()]
        self.stats["round_trips"] += 1
        for result in pending:
            result.get()

    def _exists(self, path: str) -> Any:
        self.stats["round_trips"] += 1
        return self.client.exists(path)

    def _commit(self, ops: list[Op], what: str) -> list[Any]:
        """Run ``ops`` as one multi; mend tolerant index ops and retry, else raise."""
        ops = list(ops)
        for _ in range(8):
            tx = self.client.transaction()
            for op in ops:
                op.add_to(tx)
            self.stats["round_trips"] += 1
            self.stats["writes"] += 1
            results = tx.commit()
            failed = next(
                (
                    (i, r)
                    for i, r in enumerate(results)
                    if isinstance(r, Exception)
                    and not isinstance(r, RolledBackError | RuntimeInconsistency)
                ),
                None,
            )
            if failed is None:
                return results
            i, err = failed
            op = ops[i]
            if not op.tolerant:
                raise self._error(op, err, what)
            self.stats["mended"] += 1
            if isinstance(err, NodeExistsError) or (
                isinstance(err, NoNodeError) and op.kind == "delete"
            ):
                log.warning(
                    "%s: %s %s was already done; the tree is mended", what, op.kind, op.path
                )
                del ops[i]
            elif isinstance(err, NoNodeError) and op.kind == "create":
                parent = posixpath.dirname(op.path)
                if not _is_auto_dir(parent):
                    log.warning("%s: %s has no parent %s; skipped", what, op.path, parent)
                    del ops[i]
                else:
                    ops.insert(i, Op("create", parent, tolerant=True))
            else:
                raise self._error(op, err, what)
        raise QueueError(f"{what}: the tree kept changing while writing; nothing was written")

    def _commit_many(self, batches: Sequence[tuple[list[Op], str]]) -> list[list[Any] | QueueError]:
        """Run many independent multis pipelined on the connection; each result or error.

        Each multi is still all-or-nothing and version-checked; only the waiting is
        shared. One that needs mending (a tolerant index op) is redone by ``_commit``.
        """
        sent = []
        for ops, _ in batches:
            tx = self.client.transaction()
            for op in ops:
                op.add_to(tx)
            sent.append(tx.commit_async())
        self.stats["round_trips"] += 1
        self.stats["writes"] += len(batches)
        out: list[list[Any] | QueueError] = []
        for (ops, what), pending in zip(batches, sent, strict=True):
            try:
                results = pending.get()
            except Exception as e:  # connection lost: the multi may or may not have run
                out.append(QueueError(f"{what}: ZooKeeper did not answer ({e!r}); reload to see"))
                continue
            failed = next(
                (
                    i
                    for i, r in enumerate(results)
                    if isinstance(r, Exception)
                    and not isinstance(r, RolledBackError | RuntimeInconsistency)
                ),
                None,
            )
            if failed is None:
                out.append(results)
            elif ops[failed].tolerant:
                try:
                    out.append(self._commit(ops, what))
                except QueueError as e:
                    out.append(e)
            else:
                out.append(self._error(ops[failed], results[failed], what))
        return out

    def _error(self, op: Op, err: Exception, what: str) -> QueueError:
        if isinstance(err, BadVersionError):
            return ChangedUnderYou(
                f"{what}: changed under you ({op.path} is no longer at version {op.version}); "
                "nothing was written, reload and try again"
            )
        if isinstance(err, NoNodeError):
            if op.path.endswith("/lock"):
                return LockLost(f"{what}: the lock {op.path} is gone; nothing was written")
            return NotFound(f"{what}: {op.path} does not exist; nothing was written")
        if isinstance(err, NodeExistsError):
            return QueueError(f"{what}: {op.path} already exists; nothing was written")
        if isinstance(err, NotEmptyError):
            return ChangedUnderYou(f"{what}: {op.path} gained children; nothing was written")
        return QueueError(f"{what}: ZooKeeper refused {op.kind} {op.path}: {err!r}")

    def _create_sequential(self, prefix: str) -> str:
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        return posixpath.basename(self.client.create(prefix, b"", sequence=True))

    # --- set-up --------------------------------------------------------------

    def init(self) -> None:
        """Create the empty containers of zk-tree.md (idempotent)."""
        for path in t.CONTAINERS:
            self.client.ensure_path(path)

    # --- batches -------------------------------------------------------------

    def create_batch(self, submission: dict, *, reserved: bool = False) -> Created:
        """Create a Pending batch; the same ``batchID`` again returns the existing one.

        Without ``reserved`` the tree is exactly MerrittZK's fresh batch. ``reserved``
        also creates ``states`` in the same multi: MerrittZK takes a batch with no
        ``states`` as Pending, so it never acquires one this project submitted.

        1. A known ``batchID`` returns its batch, flagged as a duplicate.
        2. A sequential create takes the next id (``/batches/bidNNNNNNNNNN``).
        3. One multi writes submission, status and the uuid entry; if another
           submitter won the uuid meanwhile, the empty id node is dropped and
           theirs is returned as the duplicate.
        """
        if not isinstance(submission, dict):
            raise InvalidData("a submission must be a JSON object")
        uuid = submission.get("batchID")
        if uuid:
            existing = self.find_batch_by_uuid(uuid)
            if existing:
                return Created(existing, duplicate=True)
        data = t.encode_json(submission)
        bid = self._create_sequential(f"{t.BATCHES}/{t.BATCH_PREFIX}")
        ops = [
            Op("create", t.batch_node(bid, "submission"), data),
            Op(
                "create",
                t.batch_node(bid, "status"),
                t.encode_json(t.batch_status_record("Pending")),
            ),
        ]
        if reserved:
            ops.append(Op("create", t.batch_states(bid)))
        if uuid:
            ops.append(Op("create", t.batch_uuid_path(uuid), t.encode_str(bid)))
        try:
            self._commit(ops, f"create batch {bid}")
        except QueueError:
            self._delete_quietly(t.batch_path(bid))
            winner = self.find_batch_by_uuid(uuid) if uuid else None
            if winner:
                return Created(winner, duplicate=True)
            raise
        self._changed("batch", bid, None)
        return Created(bid)

    def _delete_quietly(self, path: str) -> None:
        try:
            self.client.delete(path)
        except (NoNodeError, NotEmptyError):  # already gone, or someone filled it: leave it
            pass

    def find_batch_by_uuid(self, uuid: str) -> str | None:
        got = self._get_many([t.batch_uuid_path(uuid)])[t.batch_uuid_path(uuid)]
        return t.decode_str(got[0]) if got else None

    def get_batch(self, bid: str) -> BatchRecord:
        t.check_id(t.BATCH_PREFIX, bid)
        paths = [t.batch_node(bid, n) for n in ("submission", "status", "status-report")]
        got = self._get_many(paths)
        status = got[paths[1]]
        if status is None:
            raise NotFound(f"batch {bid} does not exist")
        flags = self.exists_many([t.batch_states(bid), t.batch_node(bid, "lock")])
        return self._batch_record(bid, got[paths[0]], status, got[paths[2]], *flags)

    def exists_many(self, paths: list[str]) -> list[bool]:
        """Whether each node exists, in one pipelined round."""
        pending = [self.client.exists_async(p) for p in paths]
        self.stats["round_trips"] += 1
        return [r.get() is not None for r in pending]

    @staticmethod
    def _batch_record(bid, submission, status, report, acquired, locked) -> BatchRecord:
        st = t.decode_json(status[0]) or {}
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
        )

    def batch_submissions(self, bids: Iterable[str]) -> dict[str, dict | None]:
        """The submission of each batch, in one pipelined round; None when missing."""
        bids = list(bids)
        got = self._get_many(t.batch_node(b, "submission") for b in bids)
        return {
            b: t.decode_json(node[0]) if (node := got[t.batch_node(b, "submission")]) else None
            for b in bids
        }

    def list_batch_ids(self) -> list[str]:
        return sorted(c for c in self._children(t.BATCHES) if t.is_batch_id(c))

    def batch_statuses(self, bids: Iterable[str] | None = None) -> dict[str, dict]:
        """Status JSON of many batches in one pipelined round (missing ones left out)."""
        bids = list(self.list_batch_ids() if bids is None else bids)
        got = self._get_many(t.batch_node(b, "status") for b in bids)
        return {
            b: t.decode_json(got[t.batch_node(b, "status")][0]) or {}
            for b in bids
            if got[t.batch_node(b, "status")]
        }

    def _try_lock(self, path: str) -> bool:
        if path in self._orphaned:  # ours from before an outage: free it, then take it anew
            self.release_orphaned_locks()
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        try:
            self.client.create(path, b"", ephemeral=True)
            return True
        except NodeExistsError:  # someone else holds it: normal, try the next item
            return False
        except NoNodeError:  # the item was removed since it was listed
            return False
        except CONNECTION_ERRORS:
            # The create may have been applied with its answer lost: if so the lock is
            # ours and nobody else's, so it must go once ZooKeeper answers.
            self._orphan(path)
            raise

    def _unlock(self, path: str) -> None:
        """Drop a lock this session holds; another session's lock is left alone.

        After a force-fail and a resume, another worker may hold a new lock on the
        same path: deleting it blindly would let a third worker in beside it. When
        ZooKeeper does not answer, the lock is released once it does (see ``_orphan``).
        """
        self.stats["round_trips"] += 2
        self.stats["writes"] += 1
        try:
            self._delete_own(path)
        except CONNECTION_ERRORS:
            self._orphan(path)

    def _delete_own(self, path: str) -> None:
        stat = self.client.exists(path)
        if stat is None or stat.ephemeralOwner != self.session_id:
            return
        try:
            self.client.delete(path, version=stat.version)
        except (NoNodeError, BadVersionError):  # released meanwhile (force-fail, repair)
            pass

    def _orphan(self, path: str) -> None:
        """Remember a lock to release when the connection is back.

        A session can outlive an outage (ZooKeeper restarted and restored it, or the
        client reconnected in time): a lock it failed to drop would then keep its item
        from every worker for as long as this process lives.
        """
        log.warning("could not release %s: ZooKeeper did not answer; releasing it later", path)
        with self._orphan_guard:
            self._orphaned.add(path)
            if not self._watching_state:
                self._watching_state = True
                self.client.add_listener(self._on_state)

    def _on_state(self, state) -> bool:
        # Runs on kazoo's connection thread, which must not block: release elsewhere.
        if state == KazooState.CONNECTED and self._orphaned:
            self.client.handler.spawn(self.release_orphaned_locks)
        return False

    def release_orphaned_locks(self) -> int:
        """Release the locks left by an outage (those still ours); how many were handled."""
        with self._orphan_guard:
            paths = sorted(self._orphaned)
        handled = 0
        for path in paths:
            try:
                self._delete_own(path)
            except CONNECTION_ERRORS:
                break  # still away: the next reconnection tries again
            with self._orphan_guard:
                self._orphaned.discard(path)
            handled += 1
            log.info("released %s, left behind by a ZooKeeper outage", path)
        return handled

    def _check_session(self, record, what: str) -> None:
        if record.lock_session is not None and record.lock_session != self.session_id:
            raise LockLost(
                f"{what}: the ZooKeeper session that took the lock has ended; "
                "the step is abandoned without committing and will run again"
            )

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

    def begin_batch(self, bid: str) -> BatchRecord | None:
        """Lock a Pending batch to turn it into jobs; None when busy, gone or no longer Pending.

        A batch of a collection on hold is moved to Held (and unlocked) instead.
        """
        if not self._try_lock(t.batch_node(bid, "lock")):
            return None
        batch = self._reread_locked(bid, BatchStatus.PENDING)
        if batch is None:
            return None
        if msg := self.item_hold(batch.submission):
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
        return Op("create", t.batch_states(bid), tolerant=True)

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
        dirs = self.children_many(t.batch_job_dir(b, "batch-processing") for b in bids)
        return [b for b in bids if dirs[t.batch_job_dir(b, "batch-processing")] == []]

    def batch_is_finished(self, bid: str) -> bool:
        path = t.batch_job_dir(bid, "batch-processing")
        return self.children_many([path])[path] == []

    def batch_jobs(self, bid: str) -> dict[str, list[str]]:
        """Job ids by batch directory (``batch-processing``, ``batch-completed``, ...)."""
        got = self.children_many(t.batch_job_dir(bid, d) for d in BATCH_JOB_DIRS)
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
        self._put(t.batch_node(bid, "status-report"), t.encode_json(report), f"batch {bid}")
        self._changed("batch", bid, None)
        return report

    def _put(self, path: str, data: bytes, what: str, *, exists: bool = True) -> None:
        """Set a node's data, creating the node when missing (never its parents).

        ``exists=False`` tries the create first: a refused write still costs ZooKeeper
        a transaction, so guessing right saves one per call.
        """
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        first, second = (self._set, self._create) if exists else (self._create, self._set)
        try:
            first(path, data)
        except (NoNodeError, NodeExistsError):
            try:
                second(path, data)
            except NoNodeError:
                raise NotFound(f"{what} does not exist; nothing was written") from None
            except NodeExistsError:  # created between our two calls: set it once more
                self._set(path, data)

    def _set(self, path: str, data: bytes) -> None:
        self.client.set(path, data)

    def _create(self, path: str, data: bytes) -> None:
        self.client.create(path, data)

    def transition_batch(
        self, batch: BatchRecord | str, new: str, message: str = "", *, release_lock: bool = False
    ) -> BatchRecord:
        """Move a batch; the nodes MerrittZK reads go with the move (``batch_sides``)."""
        if isinstance(batch, str):
            batch = self.get_batch(batch)
        BATCH.check_move(batch.status, new, f"batch {batch.bid}")
        extra = batch_sides.move_ops(self, batch, new)
        try:
            return self._move_batch(batch, new, message, release_lock=release_lock, extra=extra)
        except QueueError as e:
            if new != BatchStatus.HELD:
                raise
            raise batch_sides.explain_hold(self, batch.bid, e) from None

    def _move_batch(
        self,
        batch: BatchRecord,
        new: str,
        message: str,
        *,
        release_lock: bool,
        extra: list[Op] | None = None,
    ) -> BatchRecord:
        what = f"batch {batch.bid}"
        BATCH.check_move(batch.status, new, what)
        record = t.batch_status_record(new, message)
        ops = [
            Op(
                "set",
                t.batch_node(batch.bid, "status"),
                t.encode_json(record),
                batch.status_version,
            )
        ]
        ops += extra or []
        if release_lock:
            self._check_session(batch, what)
            ops.append(Op("delete", t.batch_node(batch.bid, "lock")))
        results = self._commit(ops, what)
        moved = evolve(
            batch,
            status=new,
            message=record["message"],
            last_modified=record["last_modified"],
            status_version=results[0].version,
            acquired=_acquired_after(batch, extra or []),
            locked=batch.locked and not release_lock,
            lock_session=None if release_lock else batch.lock_session,
        )
        self._changed("batch", batch.bid, batch.status, moved)
        return moved

    def unlock_batch(self, batch: BatchRecord | str) -> None:
        bid = batch if isinstance(batch, str) else batch.bid
        self._unlock(t.batch_node(bid, "lock"))

    def lock_batch(self, bid: str) -> BatchRecord | None:
        if not self._try_lock(t.batch_node(bid, "lock")):
            return None
        return evolve(self.get_batch(bid), locked=True, lock_session=self.session_id)

    def hold_batch(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.HELD, message)

    def release_batch(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.PENDING, message)

    def delete_batch(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.DELETED, message)

    def update_reporting(self, bid: str, message: str = "") -> BatchRecord:
        return self.transition_batch(bid, BatchStatus.UPDATE_REPORTING, message)

    # --- jobs ----------------------------------------------------------------

    def create_job(
        self,
        bid: str,
        configuration: dict,
        *,
        priority: int = DEFAULT_PRIORITY,
        space_needed: int = 0,
        identifiers: dict | None = None,
        metadata: dict | None = None,
    ) -> str:
        """Create a Pending job of an existing batch, indexed under its priority.

        1. A sequential create takes the next id (``/jobs/jidNNNNNNNNNN``).
        2. One multi checks the batch exists and writes every child node, the
           ``pending`` index entry and the batch's ``batch-processing`` reference.
        """
        new = NewJob(configuration, priority, space_needed, identifiers, metadata)
        self._check_new_job(bid, new)
        self._require_batch(bid)
        jid = self._create_sequential(f"{t.JOBS}/{t.JOB_PREFIX}")
        new = replace(new, configuration=with_job_id(new.configuration, jid))
        status = t.job_status_record(JobStatus.PENDING)
        try:
            self._commit(
                self._job_create_ops(bid, jid, new, status), f"create job {jid} in batch {bid}"
            )
        except QueueError:
            self._delete_quietly(t.job_path(jid))
            raise
        self._job_created(bid, jid, new, status)
        return jid

    def create_jobs(self, bid: str, jobs: Sequence[NewJob]) -> list[str]:
        """Create many Pending jobs of a batch, in order, each exactly as ``create_job`` does
        but with the ids and the multis pipelined, ``CREATE_CHUNK`` jobs a round.

        On an error the jobs of earlier rounds stay; those of the failing round that were
        written stay too, and the error names the first one refused.

        Each job is its own multi (its own request), at most ``MAX_JOB_DATA_BYTES`` of data:
        however many jobs a round pipelines, no request nears ZooKeeper's 1 MB limit.
        """
        if not jobs:
            return []
        for new in jobs:
            self._check_new_job(bid, new)
        self._require_batch(bid)
        created: list[str] = []
        for start in range(0, len(jobs), CREATE_CHUNK):
            chunk = jobs[start : start + CREATE_CHUNK]
            ids = [
                self.client.create_async(f"{t.JOBS}/{t.JOB_PREFIX}", b"", sequence=True)
                for _ in chunk
            ]
            self.stats["round_trips"] += 1
            self.stats["writes"] += len(chunk)
            jids = [posixpath.basename(pending.get()) for pending in ids]
            chunk = [
                replace(new, configuration=with_job_id(new.configuration, jid))
                for jid, new in zip(jids, chunk, strict=True)
            ]
            statuses = [t.job_status_record(JobStatus.PENDING) for _ in chunk]
            results = self._commit_many(
                [
                    (self._job_create_ops(bid, jid, new, st), f"create job {jid} in batch {bid}")
                    for jid, new, st in zip(jids, chunk, statuses, strict=True)
                ]
            )
            error = None
            for jid, new, st, result in zip(jids, chunk, statuses, results, strict=True):
                if isinstance(result, QueueError):
                    self._delete_quietly(t.job_path(jid))
                    error = error or result
                else:
                    self._job_created(bid, jid, new, st)
                    created.append(jid)
            if error is not None:
                raise error
        return created

    @staticmethod
    def _check_new_job(bid: str, new: NewJob) -> None:
        t.check_id(t.BATCH_PREFIX, bid)
        t.check_priority(new.priority)
        if not isinstance(new.configuration, dict):
            raise InvalidData("a job configuration must be a JSON object")
        if new.space_needed < 0:
            raise InvalidData(f"space_needed must not be negative, not {new.space_needed}")
        size = sum(
            len(t.encode_json(value))
            for value in (new.configuration, new.identifiers, new.metadata)
            if value is not None
        )
        if size > MAX_JOB_DATA_BYTES:
            row = new.configuration.get("manifest_line")
            where = f"the job of manifest line {row}" if row else "the job"
            raise InvalidData(
                f"{where} would hold {size} bytes of data, over the limit of "
                f"{MAX_JOB_DATA_BYTES} bytes per job; shorten its fields"
            )

    def job_count(self) -> int:
        """Jobs in the tree, any status, from one stat of ``/jobs`` (no listing)."""
        stat = self._exists(t.JOBS)
        # Besides the jobs, /jobs holds one container: the state index (``/jobs/states``).
        return max(0, stat.numChildren - 1) if stat else 0

    def _require_batch(self, bid: str) -> None:
        if not self._exists(t.batch_node(bid, "status")):
            raise NotFound(f"batch {bid} does not exist; no job was created")

    @staticmethod
    def _job_create_ops(bid: str, jid: str, new: NewJob, status: dict) -> list[Op]:
        ops = [
            Op("check", t.batch_node(bid, "status")),
            Op("create", t.job_node(jid, "bid"), t.encode_str(bid)),
            Op("create", t.job_node(jid, "priority"), t.encode_int(new.priority)),
            Op("create", t.job_node(jid, "space_needed"), t.encode_int(new.space_needed)),
            Op("create", t.job_node(jid, "configuration"), t.encode_json(new.configuration)),
            Op("create", t.job_node(jid, "status"), t.encode_json(status)),
        ]
        for name, value in (("identifiers", new.identifiers), ("metadata", new.metadata)):
            if value is not None:
                ops.append(Op("create", t.job_node(jid, name), t.encode_json(value)))
        return ops + [
            Op("create", t.job_index(JobStatus.PENDING, new.priority, jid), tolerant=True),
            Op("create", t.batch_job_ref(bid, JobStatus.PENDING, jid), tolerant=True),
        ]

    def _job_created(self, bid: str, jid: str, new: NewJob, status: dict) -> None:
        if self.listeners:  # the job as written: listeners need not read it back
            record = JobRecord(
                jid=jid,
                bid=bid,
                priority=new.priority,
                space_needed=new.space_needed,
                configuration=new.configuration,
                status=status["status"],
                last_successful_status=status["last_successful_status"],
                last_modified=status["last_modified"],
                retry_count=status["retry_count"],
                message=status["message"],
                status_version=0,
                identifiers=new.identifiers,
                metadata=new.metadata,
            )
            self._changed("job", jid, None, record)

    def get_job(self, jid: str) -> JobRecord:
        t.check_id(t.JOB_PREFIX, jid)
        names = ("bid", "priority", "space_needed", *t.JOB_JSON_NODES)
        lock = self.client.exists_async(t.job_node(jid, "lock"))
        got = self._get_many(t.job_node(jid, n) for n in names)
        locked = lock.get() is not None
        status = got[t.job_node(jid, "status")]
        if status is None:
            raise NotFound(f"job {jid} does not exist")

        def value(name: str) -> bytes | None:
            node = got[t.job_node(jid, name)]
            return node[0] if node else None

        try:
            return self._job_record(jid, status, value, locked)
        except (ValueError, TypeError, AttributeError) as e:
            raise InvalidData(f"job {jid} has unreadable data ({e}); run check_tree") from None

    def job_node_values(
        self, jids: Sequence[str], name: str, decode: Callable[[bytes], Any] = t.decode_json
    ) -> dict[str, Any]:
        """The decoded ``name`` node (``status``, ``identifiers``, ...) of each job, read in
        pipelined rounds; None for a job or node that is missing. Plain-text nodes (``bid``)
        take ``decode=tree.decode_str``."""
        out: dict[str, Any] = {}
        for start in range(0, len(jids), READ_CHUNK):
            chunk = jids[start : start + READ_CHUNK]
            got = self._get_many(t.job_node(jid, name) for jid in chunk)
            for jid in chunk:
                node = got[t.job_node(jid, name)]
                out[jid] = decode(node[0]) if node else None
        return out

    def job_heads(
        self, jids: Sequence[str], known: dict[str, tuple[int, str | None, int]] | None = None
    ) -> dict[str, JobRecord | QueueError]:
        """What moving each job needs (status, batch, priority, lock), in pipelined rounds.

        The records are ``partial``: a bulk action moves thousands of jobs and reads
        four small nodes of each instead of all thirteen. ``known`` maps a job to the
        ``(status version, batch, priority)`` seen elsewhere (the mirror row the
        confirmation page showed): when the status node is still at that version, the
        batch and priority are taken from it and not read, since a job never changes
        batch and a priority change moves the status version (``set_priority``).
        """
        known = known or {}
        out: dict[str, JobRecord | QueueError] = {}
        valid = []
        for jid in jids:
            if t.is_job_id(jid):
                valid.append(jid)
            else:
                out[jid] = InvalidData(f"{jid!r} is not a valid job id")
        got = self._head_reads(valid, lambda jid: ("status",) if jid in known else HEAD_NODES)
        again = [
            jid
            for jid in valid
            if jid in known
            and got[jid][0]["status"]
            and got[jid][0]["status"][1].version != known[jid][0]
        ]
        got.update(self._head_reads(again, lambda jid: HEAD_NODES))
        for jid in valid:
            nodes, locked = got[jid]
            if nodes["status"] is None:
                out[jid] = NotFound(f"job {jid} does not exist")
                continue
            if "bid" not in nodes:
                _, bid, priority = known[jid]  # as the nodes would read
                nodes["bid"] = (t.encode_str(bid), None)
                nodes["priority"] = (t.encode_int(priority), None)
            try:
                record = self._job_record(
                    jid,
                    nodes["status"],
                    lambda n, nodes=nodes: nodes[n][0] if nodes.get(n) else None,
                    locked,
                )
            except (ValueError, TypeError, AttributeError) as e:
                out[jid] = InvalidData(f"job {jid} has unreadable data ({e}); run check_tree")
                continue
            out[jid] = evolve(record, partial=True)
        return out

    def _head_reads(self, jids, names_of) -> dict[str, tuple[dict[str, Any], bool]]:
        """``names_of(jid)`` nodes and the lock's existence of each job, in one round."""
        sent = {
            jid: (
                {n: self.client.get_async(t.job_node(jid, n)) for n in names_of(jid)},
                self.client.exists_async(t.job_node(jid, "lock")),
            )
            for jid in jids
        }
        if sent:
            self.stats["round_trips"] += 1
        out = {}
        for jid, (reads, lock) in sent.items():
            nodes: dict[str, Any] = {}
            for name, pending in reads.items():
                try:
                    nodes[name] = pending.get()
                except NoNodeError:
                    nodes[name] = None
            out[jid] = (nodes, lock.get() is not None)
        return out

    @staticmethod
    def _job_record(jid, status, value, locked) -> JobRecord:
        st = t.decode_json(status[0]) or {}
        return JobRecord(
            jid=jid,
            bid=t.decode_str(value("bid")),
            priority=t.decode_int(value("priority"), DEFAULT_PRIORITY),
            space_needed=t.decode_int(value("space_needed"), 0),
            configuration=t.decode_json(value("configuration")),
            status=st.get("status", ""),
            last_successful_status=st.get("last_successful_status"),
            last_modified=st.get("last_modified") or "",
            retry_count=int(st.get("retry_count") or 0),
            message=st.get("message") or "",
            status_version=status[1].version,
            identifiers=t.decode_json(value("identifiers")),
            metadata=t.decode_json(value("metadata")),
            inventory=t.decode_json(value("inventory")),
            store=t.decode_json(value("store")),
            locked=locked,
        )

    def list_job_ids(self) -> list[str]:
        return sorted(c for c in self._children(t.JOBS) if t.is_job_id(c))

    def jobs_in_state(self, status: str, watch=None) -> list[tuple[int, str]]:
        """``(priority, jid)`` of the index directory of ``status``, in serving order;
        ``watch`` is called once on the directory's next change."""
        entries = (t.parse_index_name(n) for n in self._children(t.job_state_dir(status), watch))
        return sorted(e for e in entries if e)

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
        """Take the job's ephemeral lock; None when someone else holds it."""
        if not self._try_lock(t.job_node(jid, "lock")):
            return None
        try:
            return evolve(self.get_job(jid), locked=True, lock_session=self.session_id)
        except NotFound:
            self._unlock(t.job_node(jid, "lock"))
            return None
        except BaseException:
            self._unlock(t.job_node(jid, "lock"))
            raise

    def still_ours(self, job: JobRecord) -> bool:
        """Whether ``job`` is still at its status version and locked by this session.

        For a worker going on to the job's next step under its lock (one round trip).
        The status version alone answers while this session lives: the lock is ephemeral
        and only a status write (a force-fail) removes it otherwise. When not, the lock
        is dropped if this session still holds it, and only then: after an admin's
        force-fail it may be another worker's.
        """
        self.stats["round_trips"] += 1
        status = self.client.exists(t.job_node(job.jid, "status"))
        same_session = self.session_id == job.lock_session
        if same_session and status is not None and status.version == job.status_version:
            return True
        lock = self.client.exists(t.job_node(job.jid, "lock"))
        if same_session and lock is not None and lock.ephemeralOwner == self.session_id:
            self._unlock(t.job_node(job.jid, "lock"))
        return False

    def unlock_job(self, job: JobRecord | str) -> None:
        jid = job if isinstance(job, str) else job.jid
        self._unlock(t.job_node(jid, "lock"))

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
        moves = moves + [Op("delete", lock.path, tolerant=True) for lock in unlock]
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
        planned, batches = [], []
        for job, new, message, retry in moves:
            try:
                record, ops = self._plan_move(job, new, message, retry)
            except QueueError as e:
                out.append(e)
                continue
            status_op = Op(
                "set", t.job_node(job.jid, "status"), t.encode_json(record), job.status_version
            )
            planned.append((len(out), job, record))
            batches.append(([status_op, *ops], f"job {job.jid}"))
            out.append(None)
        for (i, job, record), result in zip(planned, self._commit_many(batches), strict=True):
            if isinstance(result, QueueError):
                out[i] = result
            else:
                out[i] = self._written(job, record, result[0].version, release_lock=False)
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
        ops += [Op("delete", path, tolerant=True) for path in locks]
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
        ops = [Op("set", t.job_node(job.jid, "status"), t.encode_json(record), job.status_version)]
        ops += extra
        if release_lock or keep_lock:
            self._check_session(job, what)
            lock = t.job_node(job.jid, "lock")
            ops.append(Op("delete", lock) if release_lock else Op("check", lock))
        data_ops = self._data_ops(job, data or {})
        try:
            results = self._commit(ops + data_ops, what)
        except QueueError as e:
            if not data_ops or isinstance(e, ChangedUnderYou | LockLost):
                raise
            # An optional node there or not, unlike the record said: one write each, as
            # ``save_job_data`` does, then the move alone.
            for name, value in (data or {}).items():
                self._write_data(job.jid, name, value, exists=True)
            results = self._commit(ops, what)
        return self._written(job, record, results[0].version, release_lock=release_lock, data=data)

    def _data_ops(self, job: JobRecord, data: dict[str, Any]) -> list[Op]:
        ops = []
        for name, value in data.items():
            path, encoded = self._data_node(job.jid, name, value)
            exists = name == "space_needed" or getattr(job, name) is not None
            ops.append(Op("set", path, encoded) if exists else Op("create", path, encoded))
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
        self, job: JobRecord, record: dict, version: int, *, release_lock: bool, data=None
    ):
        """The job as a status write left it; tells the listeners."""
        written = evolve(
            job,
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
        self._changed("job", job.jid, job.status, written)
        return written

    def _move_ops(self, job: JobRecord, new_index: str, new_status: str) -> list[Op]:
        ops: list[Op] = []
        old_index = job.index_path
        if old_index != new_index:
            ops += [Op("delete", old_index, tolerant=True), Op("create", new_index, tolerant=True)]
        if job.bid and batch_dir_for(job.status) != batch_dir_for(new_status):
            old_ref = t.batch_job_ref(job.bid, job.status, job.jid)
            new_ref = t.batch_job_ref(job.bid, new_status, job.jid)
            ops += [Op("delete", old_ref, tolerant=True), Op("create", new_ref, tolerant=True)]
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
        status = t.encode_json(job.status_json())
        ops = [
            Op("set", t.job_node(job.jid, "status"), status, job.status_version),
            Op("set", t.job_node(job.jid, "priority"), t.encode_int(priority)),
            Op("delete", job.index_path, tolerant=True),
            Op("create", moved.index_path, tolerant=True),
        ]
        results = self._commit(ops, f"job {job.jid} priority")
        moved = evolve(moved, status_version=results[0].version)
        self._changed("job", job.jid, job.status, moved)
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
        self._put(path, encoded, f"job {jid}", exists=exists)
        self._data_changed(jid, name, value)

    def _data_changed(self, jid: str, name: str, value: Any) -> None:
        if len(self._data_written) > 1000:  # a store that writes data of jobs it never moves
            self._data_written.clear()
        self._data_written.setdefault(jid, {})[name] = value
        self._changed("job", jid, None, data={name: value})

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

    # --- removal -------------------------------------------------------------

    def purge_job(self, jid: str, *, with_batch: bool = False) -> None:
        """Remove a Deleted job (or, when its batch is removed, any finished job)."""
        job = self.get_job(jid)
        allowed = {"Deleted"} if not with_batch else {"Deleted", "Completed", "Failed"}
        if job.status not in allowed:
            raise NotRemovable(f"job {jid} is {job.status}; only a Deleted job can be removed")
        if job.locked:
            raise Locked(f"job {jid} is locked by a worker; not removed")
        children = self._children(t.job_path(jid))
        ops = [
            Op("delete", t.job_node(jid, c), version=job.status_version if c == "status" else -1)
            for c in children
        ]
        ops.append(Op("delete", t.job_path(jid)))
        ops += [Op("delete", job.index_path, tolerant=True)]
        if job.bid:
            ops.append(Op("delete", t.batch_job_ref(job.bid, job.status, jid), tolerant=True))
        self._commit(ops, f"remove job {jid}")
        self._changed("job", jid, job.status, removed=True)

    def purge_batch(self, bid: str) -> list[str]:
        """Remove a Completed or Deleted batch, all its jobs and its uuid entry.

        1. Refuse unless the batch is removable, unlocked, with no job processing.
        2. Remove each job in its own multi (so a crash leaves a consistent tree).
        3. Remove the batch subtree and uuid entry in one multi checked on the
           status version.
        """
        batch = self.get_batch(bid)
        if batch.status not in REMOVABLE:
            raise NotRemovable(
                f"batch {bid} is {batch.status}; only Completed or Deleted batches are removed"
            )
        if batch.locked:
            raise Locked(f"batch {bid} is locked by a worker; not removed")
        jobs = self.batch_jobs(bid)
        if jobs["batch-processing"]:
            count = len(jobs["batch-processing"])
            raise NotRemovable(f"batch {bid} still has {count} job(s) processing; not removed")
        removed = []
        for d in ("batch-completed", "batch-failed", "batch-deleted"):
            for jid in jobs[d]:
                try:
                    self.purge_job(jid, with_batch=True)
                except NotFound:  # a reference without its job: the batch removal drops it
                    pass
                removed.append(jid)
        ops = [
            Op("delete", p)
            for p in self._subtree(t.batch_path(bid))
            if p != t.batch_node(bid, "status")
        ]
        ops.insert(-1, Op("delete", t.batch_node(bid, "status"), version=batch.status_version))
        if batch.uuid and self.find_batch_by_uuid(batch.uuid) == bid:
            ops.append(Op("delete", t.batch_uuid_path(batch.uuid)))
        self._commit(ops, f"remove batch {bid}")
        self._changed("batch", bid, batch.status, removed=True)
        return removed

    def _subtree(self, root: str) -> list[str]:
        """Every path under and including ``root``, children before parents."""
        out: list[str] = []

        def walk(path: str) -> None:
            for child in self._children(path):
                walk(f"{path}/{child}")
            out.append(path)

        walk(root)
        return out

    def removable_batches(self) -> list[str]:
        return [b for b, st in self.batch_statuses().items() if st.get("status") in REMOVABLE]

    # --- holds and locks -----------------------------------------------------

    def _persistent_flag(self, path: str, on: bool, data: bytes = b"") -> bool:
        """Create or delete a persistent flag node; True when this call changed it."""
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        try:
            if on:
                self.client.create(path, data)
            else:
                self.client.delete(path)
            return True
        except (NodeExistsError, NoNodeError):  # already in the wanted state
            return False

    def pause_queue(self) -> bool:
        return self._set_paused(True)

    def unpause_queue(self) -> bool:
        return self._set_paused(False)

    def _set_paused(self, on: bool) -> bool:
        try:
            return self._persistent_flag(t.LOCK_QUEUE_INGEST, on)
        finally:
            pause_flag(self.client).forget()

    def queue_paused(self) -> bool:
        return bool(self._exists(t.LOCK_QUEUE_INGEST))

    def hold_collection(self, mnemonic: str, *, by: str = "", reason: str = "") -> bool:
        """Hold a collection under its own name and under each of its profiles' names, the
        lock Merritt's ingest checks; who and why ride in each node's data (MerrittZK
        ignores it)."""
        data = t.encode_json({"by": by, "reason": reason, "at": t.now()}) if by or reason else b""
        changed = False
        for name in self._hold_names(mnemonic):
            changed = self._persistent_flag(t.collection_lock(name), True, data) or changed
        self._changed("collection", mnemonic, None)
        return changed

    def collection_hold(self, mnemonic: str) -> dict | None:
        """Who held a collection, why and when ({} when not recorded); None when not held.

        A hold Merritt wrote under one of the collection's profiles counts.
        """
        paths = [t.collection_lock(name) for name in self._hold_names(mnemonic)]
        got = self._get_many(paths)
        for path in paths:
            if got[path] is None:
                continue
            try:
                return t.decode_json(got[path][0]) or {}
            except ValueError:  # written by another tool: held, details unknown
                return {}
        return None

    def release_collection(self, mnemonic: str) -> bool:
        """Release the collection's hold under every name it may have (ours or Merritt's)."""
        changed = False
        for name in self._hold_names(mnemonic):
            changed = self._persistent_flag(t.collection_lock(name), False) or changed
        self._changed("collection", mnemonic, None)
        return changed

    def collection_held(self, mnemonic: str) -> bool:
        return self.collection_hold(mnemonic) is not None

    def _hold_names(self, mnemonic: str) -> list[str]:
        """The lock names a hold of ``mnemonic`` is written under: ours, then Merritt's."""
        return [mnemonic, *(p for p in self.profiles.profiles_of(mnemonic) if p != mnemonic)]

    def item_hold(self, data: dict | None) -> str | None:
        """Why a job or batch (its configuration or submission) is held by a collection
        hold, in words for its message; None when it is not.

        Every Pending job and batch asks, and holds are rare: one listing of the holds
        answers, and the profile table is asked only when some hold's name needs it.
        """
        held = set(self.held_collections())
        if not held:
            return None
        collection = collection_of(data, self.profiles)
        if collection and (collection in held or not held.isdisjoint(self._hold_names(collection))):
            return f"collection {collection} is on hold"
        profile = profile_of(data)
        if profile and profile != collection and profile in held:
            return f"profile {profile} is on hold (a collection hold set in Merritt)"
        return None

    def item_collection(self, data: dict | None) -> str:
        """The collection of a job or batch written by either side ("" when unknown)."""
        return collection_of(data, self.profiles)

    def held_collections(self) -> list[str]:
        return sorted(self._children(t.LOCK_COLLECTIONS))

    def release_collection_items(self, mnemonic: str, message: str = "") -> ReleaseResult:
        """Release every held job and batch of a collection (each version-checked), whichever
        side wrote it: an item names its collection, or only its profile (Merritt's)."""
        result = ReleaseResult()
        for _, jid in self.jobs_in_state(JobStatus.HELD):
            self._release_one(
                result, jid, mnemonic, message, self._job_collection, self.release_job
            )
        for bid, st in self.batch_statuses().items():
            if st.get("status") == BatchStatus.HELD:
                self._release_one(
                    result, bid, mnemonic, message, self._batch_collection, self.release_batch
                )
        return result

    def _job_collection(self, jid: str) -> str:
        return self.item_collection(self.get_job(jid).configuration)

    def _batch_collection(self, bid: str) -> str:
        return self.item_collection(self.get_batch(bid).submission)

    @staticmethod
    def _release_one(result, item_id, mnemonic, message, collection, release) -> None:
        try:
            if collection(item_id) != mnemonic:
                return
            release(item_id, message)
            result.released.append(item_id)
        except QueueError as e:
            result.skipped[item_id] = str(e)

    def lock_storage(self, ark: str, owner: str = "") -> bool:
        """Take the persistent storage lock of ``ark``.

        The lock outlives its holder's session, so it records the owner (a job
        id): a job whose earlier run died while storing takes its own lock back.
        """
        path = t.storage_lock(ark)
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        try:
            self.client.create(path, t.encode_str(owner))
            return True
        except NodeExistsError:  # held: ours from a run that died, or someone else's
            pass
        got = self._get_many([path])[path]
        return bool(owner) and got is not None and t.decode_str(got[0]) == owner

    def release(self, lock: ItemLock) -> None:
        """Let go of ``lock`` if it is still this holder's: a step whose commit failed.

        After a force-fail another job may hold a storage lock of the same ARK, so the
        owner recorded in it is compared first; an inventory lock is this session's or
        left alone (``_unlock``).
        """
        if lock.kind == "inventory":
            self._unlock(lock.path)
            return
        self.stats["round_trips"] += 2
        self.stats["writes"] += 1
        try:
            data, stat = self.client.get(lock.path)
            if (t.decode_str(data) or "") == lock.owner:
                self.client.delete(lock.path, version=stat.version)
        except (NoNodeError, BadVersionError):  # gone, or changed hands meanwhile
            pass

    def lock_inventory(self, ark: str) -> bool:
        return self._try_lock(t.inventory_lock(ark))

    def lock_localid(self, local_id: str) -> bool:
        return self._try_lock(t.localid_lock(local_id))

    def unlock_localid(self, local_id: str) -> None:
        self._unlock(t.localid_lock(local_id))

    def locks(self) -> Iterator[tuple[str, Any]]:
        """Every lock node with its stat: queue, collection, storage, inventory, local id."""
        for parent in (
            t.LOCK_QUEUE,
            t.LOCK_COLLECTIONS,
            t.LOCK_STORAGE,
            t.LOCK_INVENTORY,
            t.LOCK_LOCALID,
        ):
            names = self._children(parent)
            got = self._get_many(f"{parent}/{n}" for n in names)
            for path, node in got.items():
                if node:
                    yield path, node[1]
