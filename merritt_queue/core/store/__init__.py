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

``QueueStore`` holds named parts, a module each, called by name at every call site
(``store.holds.hold_collection(...)``): ``jobs`` (reads), ``new_jobs``, ``job_locks``,
``moves``, ``job_data``, ``edits`` (a failed job's way back); ``batches`` (reads),
``new_batches`` (and re-runs), ``batch_locks``, ``batch_moves``, ``approvals`` (a person's
decision on a batch awaiting approval), ``followups`` (a reported
batch following its jobs); ``holds``, ``held`` (the items holds caught), ``pause``;
``locks`` (storage, inventory, local id), ``removal``; ``steps`` (what each attempt at a
job's step did). Each part is given what it shares
with the others (``shared``: the engine, the reads, their stats, the change listeners, the session's
locks) and the parts it calls; none inherits from another.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from .. import tree as t
from ..records import BatchRecord, Change, ItemLock, JobRecord, NewJob
from .approvals import Approvals
from .batches import Batches
from .batchlocks import BatchLocks
from .batchmoves import BatchMoves
from .changes import Listener
from .followups import BatchFollow
from .helditems import HeldItems
from .historywrites import History
from .holds import Holds
from .jobdata import JobData
from .jobedits import JobEdits
from .joblocks import JobLocks
from .jobmoves import JobMoves
from .jobs import Jobs
from .locks import Locks
from .newbatches import NewBatches
from .newjobs import NewJobs
from .pause import Pause
from .removal import Removal
from .shared import Shared
from .stepwrites import Steps

# The records callers take from here with the store.
__all__ = ["BatchRecord", "Change", "ItemLock", "JobRecord", "NewJob", "QueueStore"]


class QueueStore:
    """All reads and writes of the queue tree over one kazoo client, by part."""

    def __init__(
        self, client: KazooClient, *, actor: str = "", listeners: list[Listener] | None = None
    ):
        self.shared = shared = Shared(client, actor=actor, listeners=listeners)
        self.client = client
        self.engine = shared.engine
        self.reads = shared.reads
        self.stats = shared.stats
        self.changes = shared.changes
        self.session = shared.session
        history = History(shared)
        self.jobs = Jobs(shared)
        self.new_jobs = NewJobs(shared, history)
        self.job_locks = JobLocks(shared, self.jobs)
        self.job_data = JobData(shared, self.jobs, history)
        self.steps = Steps(shared)
        self.moves = JobMoves(shared, self.jobs, self.job_data, history, self.steps)
        self.edits = JobEdits(shared, self.jobs, self.moves, history)
        self.batches = Batches(shared)
        self.new_batches = NewBatches(shared, self.batches, history)
        self.batch_moves = BatchMoves(shared, self.batches, history)
        self.holds = Holds(shared)
        self.batch_locks = BatchLocks(shared, self.batches, self.batch_moves, self.holds)
        self.approvals = Approvals(shared, self.batches, self.batch_moves)
        self.followups = BatchFollow(shared, self.batches, self.batch_moves)
        self.held = HeldItems(self.batches, self.jobs, self.holds, self.batch_moves, self.moves)
        self.pause = Pause(shared)
        self.locks = Locks(shared)
        self.removal = Removal(shared, self.jobs, self.batches)

    def init(self) -> None:
        """Create the empty containers of zk-tree.md (idempotent)."""
        for path in t.CONTAINERS:
            self.client.ensure_path(path)
