"""The extra nodes a batch's move writes so MerrittZK reads the batch as this project does.

MerrittZK takes a batch with no ``states`` child as Pending and reports any batch whose
``states/batch-processing`` is empty, whatever its status. So:

- Pending -> Held creates ``states`` (a held batch must not look acquirable), and is
  refused while anyone holds the batch lock: MerrittZK may be mid-acquisition.
- Held -> Pending deletes an empty ``states`` again, unless the batch was submitted here
  (created reserved, see ``NewBatches.create_batch``): it then looks exactly like the
  fresh Pending batch MerrittZK wrote.
- -> Deleted leaves the batch as MerrittZK's cleanup (``deleteCompletedBatches``) wants it,
  with an empty ``batch-processing``, and with a persistent ``lock`` node (the batch's
  *tombstone*), so MerrittZK's reporting, which takes any batch with that directory empty,
  finds it locked and passes it by instead of throwing on it. Either side's cleanup removes
  the lock with the batch. ``batch-processing`` is written once more (its data version past
  0): a job's move back to work checks it at version 0, so no job of a deleted batch ever
  goes back to work. With jobs still in it, or anyone holding the lock, the delete is
  refused.

Every op joins the move's own multi: either all of it is written or none.
"""

from __future__ import annotations

from typing import Any, Protocol

from . import tree as t
from .errors import Locked, QueueError
from .records import BatchRecord, Op, OpKind
from .sides import is_ours
from .states import PROCESSING_DIR, BatchStatus


class Reads(Protocol):
    """The reads the sides need (the store's ``Reads``), named here so that this module
    knows nothing of the store that calls it."""

    def exists(self, path: str) -> Any: ...

    def children_stat(self, path: str) -> tuple[list[str], Any] | None: ...


def move_ops(reads: Reads, session_id: int | None, batch: BatchRecord, new: str) -> list[Op]:
    """The ops that go with moving ``batch`` to ``new``, besides its status, for the mover
    of session ``session_id``."""
    if new == BatchStatus.HELD and batch.status == BatchStatus.PENDING:
        return hold_ops(batch.bid, unlocked=batch.lock_session != session_id)
    if new == BatchStatus.PENDING and batch.status == BatchStatus.HELD:
        return release_ops(reads, batch)
    if new == BatchStatus.DELETED:
        return delete_ops(reads, session_id, batch)
    return []


def hold_ops(bid: str, *, unlocked: bool) -> list[Op]:
    """``states`` (it may exist already); when the mover does not hold the lock, a
    create and delete of the lock node, which fails the multi if anyone holds it."""
    ops = [Op(OpKind.CREATE, t.batch_states(bid), tolerant=True)]
    if unlocked:
        lock = t.batch_node(bid, "lock")
        ops += [Op(OpKind.CREATE, lock), Op(OpKind.DELETE, lock)]
    return ops


def release_ops(reads: Reads, batch: BatchRecord) -> list[Op]:
    if is_ours(batch.submission):
        return []
    stat = reads.exists(t.batch_states(batch.bid))
    if stat is None or stat.numChildren:
        return []  # jobs were created before the hold: it was acquired, and stays so
    return [Op(OpKind.DELETE, t.batch_states(batch.bid), version=stat.version)]


def delete_ops(reads: Reads, session_id: int | None, batch: BatchRecord) -> list[Op]:
    path = t.batch_job_dir(batch.bid, PROCESSING_DIR)
    lock = t.batch_node(batch.bid, "lock")
    got = reads.children_stat(path)
    ops = [Op(OpKind.CREATE, t.batch_states(batch.bid), tolerant=True)]
    if got is not None:
        jids, stat = sorted(got[0]), got[1]
        if jids:
            shown = ", ".join(jids[:10]) + (" ..." if len(jids) > 10 else "")
            raise QueueError(
                f"batch {batch.bid} was not deleted: {len(jids)} of its job(s) are not finished "
                f"yet ({shown}). Let them finish, or fail or delete them, then delete the batch."
            )
        ops.append(Op(OpKind.DELETE, path, version=stat.version))  # refused if a job came in
    ops += [Op(OpKind.CREATE, path), Op(OpKind.SET, path, b"", version=0)]
    if batch.lock_session == session_id:
        ops.append(Op(OpKind.DELETE, lock))
    return [*ops, Op(OpKind.CREATE, lock)]


def tombstone_ops(bid: str, processing_version: int | None) -> list[Op]:
    """The nodes ``delete_ops`` writes, for a Deleted batch without them (deleted before
    tombstones, or by MerrittZK). ``processing_version``: the data version its empty
    ``batch-processing`` was read at, None when missing; a job come in meanwhile fails it."""
    path = t.batch_job_dir(bid, PROCESSING_DIR)
    ops = (
        [] if processing_version is None else [Op(OpKind.DELETE, path, version=processing_version)]
    )
    ops += [Op(OpKind.CREATE, path), Op(OpKind.SET, path, b"", version=0)]
    return [*ops, Op(OpKind.CREATE, t.batch_node(bid, "lock"))]


def is_tombstone(status: str, lock: tuple[bytes, Any] | None) -> bool:
    """Whether a batch's ``lock`` node (as read; None when missing) is its tombstone: the
    persistent lock of a Deleted batch, which nobody holds and no one works under."""
    return status == BatchStatus.DELETED and lock is not None and not lock[1].ephemeralOwner


def explain_hold(reads: Reads, bid: str, error: QueueError) -> QueueError:
    """A refused hold said in plain words when the reason is someone else's lock."""
    if reads.exists(t.batch_node(bid, "lock")) is None:
        return error
    return Locked(
        f"batch {bid} was not held: another process (a worker here or Merritt's own ingest) "
        "is taking it up right now. Reload the page: if it is still Pending, try again."
    )
