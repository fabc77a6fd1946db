"""New batches: a submission's batch, created whole, once per ``batchID``; and re-run
batches, each under the next free ``<batchID>~rerun-<n>``.

Guarantee: the batch node is created in the multi that writes its submission, status and
uuid entry: nobody ever sees a batch without them, and two submitters of one ``batchID``
get one batch (the second is told it is a duplicate).
"""

from __future__ import annotations

from .. import approval as ap
from .. import history as h
from .. import rerun
from .. import tree as t
from ..errors import InvalidData, NotFound, QueueError
from ..records import Created, Op, OpKind
from ..states import BatchStatus
from .batches import Batches
from .historywrites import History
from .shared import Shared

# Ids tried by one creation while others keep taking the next one first.
CREATE_TRIES = 50

# Re-run numbers tried past the last one found, for creators racing for the same number.
TRIES = 5


class NewBatches:
    """Creating batches and re-run batches."""

    def __init__(self, shared: Shared, batches: Batches, history: History):
        self.engine = shared.engine
        self.reads = shared.reads
        self.changes = shared.changes
        self.batches = batches
        self.history = history

    def create_batch(
        self, submission: dict, *, reserved: bool = False, approval: dict | None = None
    ) -> Created:
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

        ``approval`` (the node of ``core.approval``) creates the batch Held and reserved,
        with that node, in the same multi: no worker of ours or Merritt's ever sees it
        Pending before a person approves it.
        """
        if not isinstance(submission, dict):
            raise InvalidData("a submission must be a JSON object")
        uuid = submission.get("batchID")
        if uuid:
            existing = self.batches.find_batch_by_uuid(uuid)
            if existing:
                return Created(existing, duplicate=True)
        data = t.encode_json(submission)
        status = t.batch_status_record(BatchStatus.PENDING)
        if approval is not None:
            reserved = True
            message = ap.AWAITING_MESSAGE.format(profile=approval.get("profile", ""))
            status = t.batch_status_record(BatchStatus.HELD, message)
        floor = 0
        for _ in range(CREATE_TRIES):
            bid = self._next_batch_id(floor)
            ops = [
                Op(OpKind.CREATE, t.batch_path(bid)),
                Op(OpKind.CREATE, t.batch_node(bid, "submission"), data),
                Op(OpKind.CREATE, t.batch_node(bid, "status"), t.encode_json(status)),
                self.history.batch_op(bid, h.ABSENT, 0, "", status)[0],
            ]
            if reserved:
                ops.append(Op(OpKind.CREATE, t.batch_states(bid)))
            if approval is not None:
                ops.append(Op(OpKind.CREATE, ap.path(bid), t.encode_json(approval)))
            if uuid:
                ops.append(Op(OpKind.CREATE, t.batch_uuid_path(uuid), t.encode_str(bid)))
            try:
                self.engine.commit(ops, f"create batch {bid}")
            except QueueError:
                winner = self.batches.find_batch_by_uuid(uuid) if uuid else None
                if winner:
                    return Created(winner, duplicate=True)
                if self.reads.exists(t.batch_path(bid)) is None:
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
        stat = self.reads.exists(t.BATCHES)
        if stat is None:
            raise NotFound(f"{t.BATCHES} does not exist")
        return f"{t.BATCH_PREFIX}{max(stat.cversion, floor):010d}"

    def latest_rerun(self, base: str) -> tuple[int, str | None]:
        """The highest ``n`` whose ``<base>~rerun-<n>`` names a batch, and that batch (0 and
        None when there is none). Numbers are taken in order, one read each."""
        n, bid = 0, None
        while found := self.batches.find_batch_by_uuid(rerun.rerun_uuid(base, n + 1)):
            n, bid = n + 1, found
        return n, bid

    def create_rerun_batch(
        self, base: str, submission: dict, *, approval: dict | None = None
    ) -> Created:
        """Create ``submission`` as a new reserved batch under the next free re-run batchID
        of ``base``; its ``/batch-uuids`` entry is made in the same multi, as any batch's.
        The old batch and its entry are untouched. ``approval`` creates it Held, awaiting a
        person, as ``create_batch``."""
        n, _ = self.latest_rerun(base)
        for k in range(n + 1, n + 1 + TRIES):
            created = self.create_batch(
                submission | {"batchID": rerun.rerun_uuid(base, k)},
                reserved=True,
                approval=approval,
            )
            if not created.duplicate:
                return created
        raise RuntimeError(f"no free re-run batchID for {base} after {TRIES} tries")
