"""The one ZooKeeper engine of the store's writes: multis, mending and error mapping.

Every multi of the queue, and every repair of the consistency check, goes through
``Engine.multi``: all or nothing, version-checked. A few single writes do not (a lock's
ephemeral node and its delete, the pause flag, ``put``, ``create_sequential``, the deletes
of ids a refused creation left). ``stats`` counts what it costs, so tests and benchmarks
can hold the store to its round trips and write transactions; the reads
(``reads.Reads``) count into the same ``stats``.
"""

from __future__ import annotations

import logging
import posixpath
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import (
    CheckVersion,
    Create,
    Delete,
    MultiHeader,
    SetData,
    Transaction,
)
from kazoo.security import OPEN_ACL_UNSAFE

from .. import kazoocall
from .. import multiread as mr
from ..errors import ChangedUnderYou, InvalidTransition, LockLost, NotFound, QueueError
from ..records import Op, OpKind
from ..states import BATCH_JOB_DIRS
from .reads import stat_async

# ZooKeeper's create flags (``KazooClient.create``'s ``ephemeral=True``, ``sequence=True``).
EPHEMERAL = 1
SEQUENCE = 2

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

# How often a multi with tolerant ops is mended and sent again before giving up.
MEND_ROUNDS = 8


def is_auto_dir(path: str) -> bool:
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


def refused(results: Sequence[Any]) -> tuple[int, Exception] | None:
    """The op ZooKeeper refused in a multi's results (the others only rolled back)."""
    for i, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            return i, result
    return None


def _deleted_batch_check(op: Op) -> bool:
    """A job's move back to work checks its batch's ``batch-processing`` (``jobmoves``)."""
    return op.kind == OpKind.CHECK and op.path.endswith("/states/batch-processing")


def error(op: Op, err: Exception, what: str) -> QueueError:
    """The queue's error for an op ZooKeeper refused, saying that nothing was written."""
    if isinstance(err, BadVersionError | NoNodeError) and _deleted_batch_check(op):
        bid = op.path.split("/")[2]
        return InvalidTransition(
            f"{what}: batch {bid} was deleted, so none of its jobs can go back to work; "
            "nothing was written. Submit the deposit again instead."
        )
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


class Engine:
    """Multis and single writes over one kazoo client, counted in ``stats``."""

    def __init__(self, client: KazooClient, stats: Counter[str] | None = None):
        self.client = client
        self.stats: Counter[str] = Counter() if stats is None else stats
        self._op_overhead: int | None = None

    def create_node(self, path: str, data: bytes = b"", *, ephemeral: bool = False) -> None:
        """``client.create(path, data, ephemeral=...)``, uncounted, as ``stat``."""
        self.create_node_async(path, data, ephemeral=ephemeral).get()

    def create_node_async(self, path: str, data: bytes = b"", *, ephemeral: bool = False) -> Any:
        return self._call(self._request(Op(OpKind.CREATE, path, data, ephemeral=ephemeral)))

    def multi(self, ops: Sequence[Op]) -> list[Any]:
        """Send ``ops`` as one multi, once; each op's result or exception."""
        return self._send_counted(ops).get()

    def _send_counted(self, ops: Sequence[Op]) -> Any:
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        return self._send(ops)

    def _send(self, ops: Sequence[Op]) -> Any:
        """``ops`` sent as one multi; its pending result.

        The requests are built here rather than through kazoo's ``TransactionRequest``,
        whose per-op argument checks and path normalisation cost more than the rest of a
        step's commit: the ops come from the tree's own path builders.
        """
        return self._call(Transaction([self._request(op) for op in ops]))

    def _request(self, op: Op) -> Any:
        """The kazoo request of one op, its path under the client's chroot."""
        path = mr.rooted(self.client.chroot, op.path)
        if op.kind == OpKind.CREATE:
            acl = self.client.default_acl or OPEN_ACL_UNSAFE
            flags = (EPHEMERAL if op.ephemeral else 0) | (SEQUENCE if op.sequential else 0)
            return Create(path, op.data, acl, flags)
        if op.kind == OpKind.DELETE:
            return Delete(path, op.version)
        if op.kind == OpKind.SET:
            return SetData(path, op.data, op.version)
        return CheckVersion(path, op.version)

    def op_bytes(self, op: Op) -> int:
        """At least the bytes ``op`` adds to a multi's request: its path under the chroot,
        its data, and the rest of a create (lengths, ACL, flags) with the op's header, more
        than any other kind of op carries besides its path and data."""
        if self._op_overhead is None:
            acl = self.client.default_acl or OPEN_ACL_UNSAFE
            self._op_overhead = (
                len(MultiHeader(Create.type, False, -1).serialize())
                + len(Create("", b"", acl, 0).serialize())
                + len(self.client.chroot.encode())
            )
        return self._op_overhead + len(op.path.encode()) + len(op.data)

    def _call(self, request: Any) -> Any:
        return kazoocall.send(self.client, request)

    def commit(self, ops: Sequence[Op], what: str) -> list[Any]:
        """Run ``ops`` as one multi; mend tolerant index ops and retry, else raise."""
        return self._commit(ops, what, None)[0]

    def commit_and_stat(self, ops: Sequence[Op], what: str, path: str) -> tuple[list[Any], Any]:
        """``commit``, and the stat of ``path`` as it is right after the multi (None when
        missing, or when the read got no answer: the caller may ask again).

        The read goes out with the multi, not after its answer: ZooKeeper serves a
        session's requests in order, so it is still read after the multi, and nobody
        waits for it.
        """
        return self._commit(ops, what, path)

    def _commit(self, ops: Sequence[Op], what: str, path: str | None) -> tuple[list[Any], Any]:
        ops = list(ops)
        for _ in range(MEND_ROUNDS):
            sent = self._send_counted(ops)
            after = stat_async(self.client, path) if path is not None else None
            results = sent.get()
            failed = refused(results)
            if failed is None:
                return results, _answer(after)
            i, err = failed
            op = ops[i]
            if not op.tolerant:
                raise error(op, err, what)
            self.stats["mended"] += 1
            if isinstance(err, NodeExistsError) or (
                isinstance(err, NoNodeError) and op.kind == OpKind.DELETE
            ):
                log.warning(
                    "%s: %s %s was already done; the tree is mended", what, op.kind, op.path
                )
                del ops[i]
            elif isinstance(err, NoNodeError) and op.kind == OpKind.CREATE:
                parent = posixpath.dirname(op.path)
                if not is_auto_dir(parent):
                    log.warning("%s: %s has no parent %s; skipped", what, op.path, parent)
                    del ops[i]
                else:
                    ops.insert(i, Op(OpKind.CREATE, parent, tolerant=True))
            else:
                raise error(op, err, what)
        raise QueueError(f"{what}: the tree kept changing while writing; nothing was written")

    def commit_many(self, batches: Sequence[tuple[list[Op], str]]) -> list[list[Any] | QueueError]:
        """Run many independent multis pipelined on the connection; each result or error.

        Each multi is still all-or-nothing and version-checked; only the waiting is
        shared. One that needs mending (a tolerant index op) is redone by ``commit``.
        """
        sent = [self._send(ops) for ops, _ in batches]
        self.stats["round_trips"] += 1
        self.stats["writes"] += len(batches)
        out: list[list[Any] | QueueError] = []
        for (ops, what), pending in zip(batches, sent, strict=True):
            try:
                results = pending.get()
            except Exception as e:  # connection lost: the multi may or may not have run
                out.append(QueueError(f"{what}: ZooKeeper did not answer ({e!r}); reload to see"))
                continue
            failed = refused(results)
            if failed is None:
                out.append(results)
            elif ops[failed[0]].tolerant:
                try:
                    out.append(self.commit(ops, what))
                except QueueError as e:
                    out.append(e)
            else:
                out.append(error(ops[failed[0]], failed[1], what))
        return out

    def create_sequential(self, prefix: str) -> str:
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        return posixpath.basename(self.client.create(prefix, b"", sequence=True))

    def create_sequential_many(self, prefix: str, count: int, what: str) -> list[str]:
        """``count`` empty sequential nodes under ``prefix`` in one multi (one transaction),
        their names in order: ZooKeeper answers a multi's sequential creates with the paths
        it made, counters increasing in the order of the ops."""
        ops = [Op(OpKind.CREATE, prefix, sequential=True)] * count
        return [posixpath.basename(path) for path in self.commit(ops, what)]

    def delete_quietly(self, path: str) -> None:
        self.delete_quietly_many([path])

    def delete_quietly_many(self, paths: Sequence[str]) -> None:
        """Delete each node, pipelined in one round; one already gone, or filled by someone
        meanwhile, is left alone without keeping the others: each is its own delete."""
        if not paths:
            return
        sent = [self._call(self._request(Op(OpKind.DELETE, path))) for path in paths]
        self.stats["round_trips"] += 1
        self.stats["writes"] += len(paths)
        for pending in sent:
            try:
                pending.get()
            except (NoNodeError, NotEmptyError):
                pass

    def flag(self, path: str, on: bool, data: bytes = b"") -> bool:
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

    def put(self, path: str, data: bytes, what: str, *, exists: bool = True) -> None:
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
        self.create_node(path, data)


def _answer(pending: Any) -> Any:
    """A pipelined read's answer, None when there is none: its multi was applied, and a
    read that failed must not make it look as if it had not been."""
    if pending is None:
        return None
    try:
        return pending.get()
    except (*CONNECTION_ERRORS, KazooException):
        return None
