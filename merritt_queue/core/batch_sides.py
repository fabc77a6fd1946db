"""The extra nodes a batch's move writes so MerrittZK reads the batch as this project does.

MerrittZK takes a batch with no ``states`` child as Pending and reports any batch whose
``states/batch-processing`` is empty, whatever its status. So:

- Pending -> Held creates ``states`` (a held batch must not look acquirable), and is
  refused while anyone holds the batch lock: MerrittZK may be mid-acquisition.
- Held -> Pending deletes an empty ``states`` again, unless the batch was submitted here
  (created reserved, see ``QueueStore.create_batch``): it then looks exactly like the
  fresh Pending batch MerrittZK wrote.
- -> Deleted removes an empty ``batch-processing``, so MerrittZK's reporting skips the
  batch instead of throwing on it; with jobs still in it the delete is refused.

Every op joins the move's own multi: either all of it is written or none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import tree as t
from .errors import Locked, QueueError
from .records import BatchRecord, Op, OpKind
from .sides import is_ours
from .states import BatchStatus

if TYPE_CHECKING:
    from .store import QueueStore


def move_ops(store: QueueStore, batch: BatchRecord, new: str) -> list[Op]:
    """The ops that go with moving ``batch`` to ``new``, besides its status."""
    if new == BatchStatus.HELD and batch.status == BatchStatus.PENDING:
        return hold_ops(batch.bid, unlocked=batch.lock_session != store.session_id)
    if new == BatchStatus.PENDING and batch.status == BatchStatus.HELD:
        return release_ops(store, batch)
    if new == BatchStatus.DELETED:
        return delete_ops(store, batch)
    return []


def hold_ops(bid: str, *, unlocked: bool) -> list[Op]:
    """``states`` (it may exist already); when the mover does not hold the lock, a
    create and delete of the lock node, which fails the multi if anyone holds it."""
    ops = [Op(OpKind.CREATE, t.batch_states(bid), tolerant=True)]
    if unlocked:
        lock = t.batch_node(bid, "lock")
        ops += [Op(OpKind.CREATE, lock), Op(OpKind.DELETE, lock)]
    return ops


def release_ops(store: QueueStore, batch: BatchRecord) -> list[Op]:
    if is_ours(batch.submission):
        return []
    stat = store.engine.exists(t.batch_states(batch.bid))
    if stat is None or stat.numChildren:
        return []  # jobs were created before the hold: it was acquired, and stays so
    return [Op(OpKind.DELETE, t.batch_states(batch.bid), version=stat.version)]


def delete_ops(store: QueueStore, batch: BatchRecord) -> list[Op]:
    path = t.batch_job_dir(batch.bid, "batch-processing")
    got = store.engine.children_stat(path)
    if got is None:
        return []
    jids, stat = sorted(got[0]), got[1]
    if jids:
        shown = ", ".join(jids[:10]) + (" ..." if len(jids) > 10 else "")
        raise QueueError(
            f"batch {batch.bid} was not deleted: {len(jids)} of its job(s) are not finished "
            f"yet ({shown}). Let them finish, or fail or delete them, then delete the batch."
        )
    return [Op(OpKind.DELETE, path, version=stat.version)]


def explain_hold(store: QueueStore, bid: str, error: QueueError) -> QueueError:
    """A refused hold said in plain words when the reason is someone else's lock."""
    if store.engine.exists(t.batch_node(bid, "lock")) is None:
        return error
    return Locked(
        f"batch {bid} was not held: another process (a worker here or Merritt's own ingest) "
        "is taking it up right now. Reload the page: if it is still Pending, try again."
    )
