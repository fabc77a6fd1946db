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

The store is one class composed of a part per idea, a module each: batches
(``batches``), a reported batch following its jobs (``followups``), re-run batches
(``reruns``), job creation and reads (``jobs``), job moves (``jobmoves``), a failed job's
edit and resume (``jobedits``), removal (``removal``), holds (``holds``) and the items they
held (``helditems``), locks and their release after an outage (``locks``), history appends
(``historywrites``). Each part builds on ``base``, which holds the plumbing it uses rather
than inherits: the ZooKeeper engine (``engine``: reads, multis, error mapping) and the
change listeners with the writer's name (``changes``).
Callers use ``QueueStore`` alone.
"""

from __future__ import annotations

from ..records import BatchRecord, Change, ItemLock, JobRecord, NewJob
from .batches import BatchStore
from .followups import BatchFollow
from .helditems import HeldItems
from .jobedits import JobEdits
from .jobmoves import JobMoves
from .jobs import JobStore
from .locks import Locks
from .removal import Removal
from .reruns import Reruns

# The records callers take from here with the store.
__all__ = ["BatchRecord", "Change", "ItemLock", "JobRecord", "NewJob", "QueueStore"]


class QueueStore(
    Reruns, BatchFollow, BatchStore, JobStore, JobEdits, JobMoves, Removal, HeldItems, Locks
):
    """All reads and writes of the queue tree over one kazoo client."""
