"""The store's plumbing: the client, pipelined reads, multis and their errors, the
change listeners, and the ephemeral locks every item kind takes."""

from __future__ import annotations

import logging
import posixpath
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
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

from .. import tree as t
from ..changebuffer import ChangeBuffer
from ..errors import (
    ChangedUnderYou,
    InvalidTransition,
    LockLost,
    NotFound,
    QueueError,
)
from ..itemkeys import NoProfiles, Profiles
from ..records import (
    Change,
    Op,
)
from ..states import (
    BATCH_JOB_DIRS,
)

# One logger for all of the store, whichever part of it speaks.
log = logging.getLogger("merritt_queue.core.store")

# ZooKeeper did not answer: the request may or may not have been applied.
CONNECTION_ERRORS = (
    ConnectionLoss,
    ConnectionClosedError,
    OperationTimeoutError,
    SessionExpiredError,
    KazooTimeoutError,
)


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


class StoreBase:
    """What every part of ``QueueStore`` builds on (the parts are mixins of it)."""

    def __init__(self, client: KazooClient, *, actor: str = "", listeners: list | None = None):
        self.client = client
        self.stats: Counter[str] = Counter()
        # Who is writing ("worker", "admin:<user>"), recorded with each change: the
        # process's default, which a thread or task may override for itself (``act_as``).
        self._default_actor = actor
        self._acting: ContextVar[str | None] = ContextVar(f"actor-{id(self)}", default=None)
        self.listeners: list = list(listeners or [])
        # Per thread or task: the web app shares one store between its request threads.
        self._deferred: ContextVar[ChangeBuffer | None] = ContextVar(
            f"deferred-{id(self)}", default=None
        )
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

    @property
    def actor(self) -> str:
        acting = self._acting.get()
        return self._default_actor if acting is None else acting

    @actor.setter
    def actor(self, actor: str) -> None:
        """The process's actor (a worker, the dispatcher, a command); the calling thread
        drops any actor of its own, so that one it set earlier does not outlive this."""
        self._default_actor = actor
        self._acting.set(None)

    def act_as(self, actor: str) -> None:
        """Write as ``actor`` in this thread or task only, until it says otherwise: one
        store serves every request thread, and their people must not mix."""
        self._acting.set(actor)

    @contextmanager
    def acting_as(self, actor: str) -> Iterator[None]:
        """Write as ``actor`` in this thread or task for the block only."""
        token = self._acting.set(actor)
        try:
            yield
        finally:
            self._acting.reset(token)

    def _changed(
        self, kind: str, item_id: str, old_status, record=None, removed=False, data=None
    ) -> None:
        """Tell the listeners; a failing listener must never fail or undo the write."""
        if not self.listeners:
            return
        change = Change(kind, item_id, old_status, record, removed, self.actor, data)
        deferred = self._deferred.get()
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
        if max_delay == 0 or self._deferred.get() is not None:
            yield  # nested: the outer block tells
            return
        buffer = ChangeBuffer(self._tell, max_delay)
        token = self._deferred.set(buffer)
        try:
            yield
        finally:
            self._deferred.reset(token)
            buffer.close()

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
            if op.kind == "check" and op.path.endswith("/states/batch-processing"):
                bid = op.path.split("/")[2]
                return InvalidTransition(
                    f"{what}: batch {bid} was deleted, so none of its jobs can go back to work; "
                    "nothing was written. Submit the deposit again instead."
                )
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

    def init(self) -> None:
        """Create the empty containers of zk-tree.md (idempotent)."""
        for path in t.CONTAINERS:
            self.client.ensure_path(path)

    def _delete_quietly(self, path: str) -> None:
        try:
            self.client.delete(path)
        except (NoNodeError, NotEmptyError):  # already gone, or someone filled it: leave it
            pass

    def exists_many(self, paths: list[str]) -> list[bool]:
        """Whether each node exists, in one pipelined round."""
        pending = [self.client.exists_async(p) for p in paths]
        self.stats["round_trips"] += 1
        return [r.get() is not None for r in pending]

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
