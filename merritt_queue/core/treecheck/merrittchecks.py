"""Batch states that wedge Merritt's own ingest (MerrittZK) on a shared ensemble.

MerrittZK does not read statuses to decide what to take: its batch pickup takes
any batch with no ``states`` child, and its reporter any batch whose
``states/batch-processing`` exists and is empty. A batch whose status and nodes
disagree on those two facts is either taken when it must not be (and MerrittZK
throws half-way, leaving its lock), or never reported at all. None of these is
damage to the queue's own tree, so ``consistency`` would stay silent; this
module finds them for ``check_tree`` and plans the repairs that are safe.

Each repair is one multi guarded by the batch's status version as read, so a
batch that moved since the check read it is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import batch_sides, history
from .. import tree as t
from ..records import OpKind
from ..states import PROCESSING_DIR, BatchStatus, batch_dir_for
from . import checker as c
from . import treerepair as r
from .treerepair import RepairFailed

if TYPE_CHECKING:
    from ..treeread import Node, _Batch
    from .checker import Checker


def check_batch(checker: Checker, batch: _Batch) -> None:
    """The Merritt-facing findings of one batch whose status was read and understood."""
    if batch.status == BatchStatus.HELD and "states" not in batch.children:
        _held_without_states(checker, batch)
    elif batch.status == BatchStatus.PROCESSING:
        _processing_without_jobs(checker, batch)
    elif batch.status in (BatchStatus.COMPLETED, BatchStatus.FAILED):
        _finished_early(checker, batch)
    elif batch.status == BatchStatus.DELETED:
        _deleted_blocking_reports(checker, batch)


def locked_shell(checker: Checker, batch: _Batch, lock: Node) -> None:
    """A batch node with a lock but no status: what MerrittZK's pickup leaves when it takes
    a batch whose creation is not finished (it takes any batch without ``states``, locks
    it, fails to load it, and its process keeps the lock until it ends)."""
    owner = lock[1].ephemeralOwner
    held = f"ZooKeeper session {owner:#x}" if owner else "a persistent lock node"
    checker.add(
        "locked-half-created-batch",
        t.batch_path(batch.id),
        f"Batch {batch.id} has no status node (nor a states node) and is locked by {held}. "
        "Merritt's ingest takes any batch without a states node: its batch pickup locked this "
        "one before its creation was finished, failed to read it, and keeps the lock for as "
        "long as its process lives. The lock is never removed here (its holder is alive); "
        "restart Merritt's ingest to let it go, then run the check again to remove the "
        "empty node.",
    )


def _status_guard(batch: _Batch) -> r.Op:
    return r.check(t.batch_node(batch.id, "status"), batch.version("status"))


def _status_write(checker: Checker, batch: _Batch, new: str, message: str) -> list:
    """Set the batch's status at the version read, with its history entry (by the
    checker's actor) in the same multi."""
    record = t.batch_status_record(new, message)
    version = batch.version("status")
    node = batch.node(history.NODE)
    old = history.decode(node[0] if node else None, node is not None)
    entry = history.Entry(
        version + 1, batch.status or "", new, record["last_modified"], message, 0, checker.actor
    )
    data = history.append(old, entry)[1]
    path = t.batch_node(batch.id, history.NODE)
    return [
        r.set_data(t.batch_node(batch.id, "status"), t.encode_json(record), version),
        r.set_data(path, data) if old.exists else r.create(path, data),
    ]


def _held_without_states(checker: Checker, batch: _Batch) -> None:
    states = t.batch_states(batch.id)
    checker.add(
        "held-batch-takeable",
        t.batch_path(batch.id),
        f"Batch {batch.id} is Held but has no states node. Merritt's ingest takes any batch "
        "without one: it would lock this batch, fail to start it (a held batch cannot move to "
        "Processing) and leave it locked. Creating the empty states node makes Merritt's "
        "ingest pass it by; nothing else reads that node before the batch is released.",
        f"create {states}",
        lambda: [_status_guard(batch), r.create(states)],
    )


def _jobs_of(checker: Checker, batch: _Batch) -> list[str]:
    named = set(checker.jobs_by_batch.get(batch.id, []))
    referenced = {name for names in batch.refs.values() for name in names}
    return sorted(named | referenced)


def _processing_without_jobs(checker: Checker, batch: _Batch) -> None:
    if PROCESSING_DIR in batch.refs or _jobs_of(checker, batch) or batch.node("lock"):
        return
    idle = checker.now - batch.nodes["status"][1].mtime / 1000
    if idle < checker.grace:
        return  # a pickup still filling its batch (MerrittZK creates the jobs after states)
    head = (
        f"Batch {batch.id} is Processing with no jobs and no {PROCESSING_DIR} node, and no one "
        "holds it, so neither this queue nor Merritt's ingest will ever report it. Merritt's "
        "ingest leaves a batch like this when it took a submission it could not turn into "
        "jobs, or when its pickup was interrupted."
    )
    message = (
        "No jobs were ever created for this batch and nothing would report it, so the "
        "consistency check failed it. Delete it, or submit the deposit again."
    )
    lock = t.batch_node(batch.id, "lock")

    def plan():
        # A lock cannot be checked absent inside a multi: look right before writing.
        if r.exists(checker.reads, lock):
            raise RepairFailed(f"batch {batch.id} is locked now; run the check again")
        return _status_write(checker, batch, BatchStatus.FAILED, message)

    checker.add(
        "processing-batch-without-jobs",
        t.batch_path(batch.id),
        f"{head} It has been Processing for {c._age(idle)}. The repair marks it Failed with a "
        "message saying so; a person then deletes it or has the deposit submitted again.",
        "set the batch Failed",
        plan,
    )


def _still_running(checker: Checker, batch: _Batch) -> list[str]:
    """Jobs of the batch whose status still counts as processing for it (Held counts)."""
    out = []
    for jid in _jobs_of(checker, batch):
        job = checker.tree.jobs.get(jid)
        if job is None or not job.status or job.bid != batch.id:
            continue
        if batch_dir_for(job.status) == PROCESSING_DIR:
            out.append(jid)
    return out


def _finished_early(checker: Checker, batch: _Batch) -> None:
    running = _still_running(checker, batch)
    if not running:
        return
    path = t.batch_path(batch.id)
    head = (
        f"Batch {batch.id} is {batch.status} but {len(running)} of its jobs are still "
        f"running (first: {running[0]}), so it was reported before they finished and its "
        "report leaves them out."
    )
    if batch.status == BatchStatus.COMPLETED:
        checker.add(
            "batch-finished-early",
            path,
            f"{head} Completed is final: no report will follow. When those jobs finish, "
            "tell the depositor of their outcome from the batch's page.",
        )
        return
    if batch.node("lock"):
        checker.add(
            "batch-finished-early",
            path,
            f"{head} It is locked, so a reporter may still be at work on it; it is only "
            "reported. Check again later: unlocked, it is moved to UpdateReporting.",
        )
        return
    message = (
        "Reported while some jobs were still running; it will be reported again when they finish."
    )
    checker.add(
        "batch-finished-early",
        path,
        f"{head} The repair moves it to UpdateReporting, so it is reported again once its "
        "last job finishes.",
        "set the batch UpdateReporting",
        lambda: _status_write(checker, batch, BatchStatus.UPDATE_REPORTING, message),
    )


def _deleted_blocking_reports(checker: Checker, batch: _Batch) -> None:
    """A Deleted batch without its tombstone (``batch_sides.delete_ops``): one deleted before
    tombstones, or by Merritt's admin. An empty ``batch-processing`` and no lock: MerrittZK's
    reporting takes it and throws. No ``batch-processing``: MerrittZK's cleanup never removes
    it. A live (ephemeral) lock is someone's, and is left to them."""
    processing = PROCESSING_DIR in batch.refs
    if batch.node("lock") is not None or (processing and batch.refs[PROCESSING_DIR]):
        return
    node = t.batch_job_dir(batch.id, PROCESSING_DIR)

    def plan():
        if "states" not in batch.children:
            raise RepairFailed(f"batch {batch.id} has no states node; run the check again")
        version = None
        if processing:
            stat = checker.client.exists(node)
            if stat is None:
                raise RepairFailed(f"{node} no longer exists; nothing was written")
            version = stat.version
        ops = batch_sides.tombstone_ops(batch.id, version)
        return [_status_guard(batch), *[_as_repair(op) for op in ops]]

    if processing:
        kind, path, head = (
            "deleted-batch-blocks-reporting",
            node,
            f"Batch {batch.id} is Deleted, with an empty {PROCESSING_DIR} node and no lock. "
            "Merritt's ingest reports every batch with that node empty: it would lock this "
            "one, fail to move it (a deleted batch cannot be reported) and stop there, "
            "holding up the reports of later batches, and keep the lock.",
        )
    else:
        kind, path, head = (
            "deleted-batch-unremovable-by-merritt",
            t.batch_path(batch.id),
            f"Batch {batch.id} is Deleted but has no {PROCESSING_DIR} node, so Merritt's "
            "cleanup (deleteCompletedBatches, the admin tool's) passes it by; only this "
            "queue's cleanup removes it.",
        )
    checker.add(
        kind,
        path,
        f"{head} The repair gives it an empty {PROCESSING_DIR} node and a persistent lock "
        "node (its tombstone), as a deletion here does: Merritt's reporting then passes it "
        "by, and either side's cleanup removes it.",
        "create the batch's tombstone lock"
        + (f" and write {PROCESSING_DIR} once" if processing else f" and {PROCESSING_DIR}"),
        plan,
    )


def _as_repair(op) -> r.Op:
    """A store op as the repair's op."""
    if op.kind == OpKind.CREATE:
        return r.create(op.path, op.data)
    if op.kind == OpKind.DELETE:
        return r.delete(op.path, op.version)
    return r.set_data(op.path, op.data, op.version)
