"""The admin actions on jobs, batches, collections and the queue: what each one does
through the queue core, and which statuses it applies to. Who may take them and what a
confirmation page lists is ``steering.planning``; taking them is ``steering.actions``."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from merritt_queue.core.errors import QueueError
from merritt_queue.core.states import JOB_STEPS, BatchStatus, JobStatus
from merritt_queue.core.store import QueueStore
from merritt_queue.deposit.uploads import remove_upload, uploads_root
from steering.models import ADMINISTRATOR, OPERATOR

J, B = JobStatus, BatchStatus
RUNNING = frozenset({J.PENDING, *JOB_STEPS})


@dataclass(frozen=True)
class Action:
    name: str
    scope: str  # job | batch | collection | queue
    label: str
    role: str  # the least group that may take it
    applies_to: frozenset[str] = frozenset()  # statuses; empty for collections and the queue
    run: Callable = field(default=lambda store, item, params, note: None, repr=False)
    warning: str = ""
    locked_ok: bool = False  # may act on an item a worker holds
    # Job actions that are one status move: ``move(store, job, params) -> (status, retry)``
    # and ``after(job)`` once it is written, in place of ``run``: execution pipelines them.
    move: Callable | None = field(default=None, repr=False)
    after: Callable | None = field(default=None, repr=False)
    what: str = ""  # the past tense the job's message gets: "resumed by <who>: <reason>"
    # Why the action does not apply to a status, where "it applies to X" would not help.
    refusals: dict = field(default_factory=dict, repr=False)
    refused_in_deleted_batch: bool = False  # a job move that would bring a job back to work


# --- what each action does through the core ----------------------------------------


def note_of(user_note: str, what: str) -> str:
    return f"{what} by {user_note}"


def _job_move(name, label, role, applies_to, move, what, after=None, **extra) -> Action:
    """An action that moves a job; ``run_items`` moves its jobs in pipelined chunks, one
    job or thousands alike (``_move_chunk``)."""
    return Action(
        name,
        "job",
        label,
        role,
        frozenset(applies_to),
        move=move,
        after=after,
        what=what,
        **extra,
    )


def _remove_work_dir(job) -> None:
    shutil.rmtree(Path(settings.MQ_WORK_DIR) / "jobs" / job.jid, ignore_errors=True)


def _batch_delete(store: QueueStore, batch, params, note):
    """The batch and those of its jobs that can be deleted; the others are listed.

    The jobs are read and moved in pipelined rounds (``job_heads``, ``move_jobs``), not
    one round trip each: a batch can hold thousands.
    """
    deleted = store.transition_batch(batch, B.DELETED, note_of(note, "deleted"))
    jids = [jid for group in store.batch_jobs(batch.bid).values() for jid in group]
    heads = store.job_heads(jids)
    message = note_of(note, f"deleted with batch {batch.bid}")
    moves, kept = [], []
    for jid in jids:
        job = heads[jid]
        if isinstance(job, QueueError):
            raise job
        if job.status in (J.FAILED, J.HELD):
            moves.append((job, J.DELETED, message, False))
        elif job.status != J.DELETED:
            kept.append(f"{jid} ({job.status})")
    with store.deferred_changes():
        written = store.move_jobs(moves)
    for result in written:
        if isinstance(result, QueueError):
            raise result
    if kept:  # their upload stays while they run; cleanup removes it after the purge
        return deleted, "not deleted, only Failed or Held jobs can be: " + ", ".join(kept)
    _remove_upload(batch)
    return deleted


def _remove_upload(batch) -> None:
    remove_upload(uploads_root(settings.MQ_WORK_DIR), (batch.submission or {}).get("payload_url"))


def _batch_purge(store: QueueStore, batch, params, note):
    removed = store.purge_batch(batch.bid)
    _remove_upload(batch)
    return None, f"removed with {len(removed)} job(s)"


def _to(target: str):
    return lambda store, job, params: (target, False)


def _batch_move(name: str, label: str, applies_to, target: str, what: str) -> Action:
    """An operator's action that moves a batch from ``applies_to`` to ``target``."""

    def run(store: QueueStore, batch, params, note):
        return store.transition_batch(batch, target, note_of(note, what))

    return Action(name, "batch", label, OPERATOR, frozenset(applies_to), run)


def _collection(method: str):
    def run(store: QueueStore, mnemonic, params, note):
        if method == "hold_collection":
            by, _, reason = note.partition(": ")
            result = store.hold_collection(mnemonic, by=by, reason=reason)
        else:
            result = getattr(store, method)(mnemonic)
        if method == "release_collection_items":
            skipped = "; ".join(f"{k}: {v}" for k, v in result.skipped.items())
            return None, f"released {len(result.released)} item(s)" + (
                f"; not released: {skipped}" if skipped else ""
            )
        return None, "done" if result else "already so"

    return run


def _queue(method: str):
    def run(store: QueueStore, _item, params, note):
        return None, "done" if getattr(store, method)() else "already so"

    return run


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        _job_move("job.hold", "Hold", OPERATOR, {J.PENDING}, _to(J.HELD), "held"),
        _job_move(
            "job.release",
            "Release",
            OPERATOR,
            {J.HELD},
            _to(J.PENDING),
            "released",
            refused_in_deleted_batch=True,
        ),
        _job_move(
            "job.resume",
            "Resume",
            OPERATOR,
            {J.FAILED},
            lambda store, job, params: (store.resume_step(job, params.get("step") or None), True),
            "resumed",
            refused_in_deleted_batch=True,
        ),
        Action(
            "job.force_fail",
            "job",
            "Force fail",
            ADMINISTRATOR,
            RUNNING,
            lambda store, job, params, note: store.force_fail(job, note_of(note, "force-failed")),
            warning="The job's lock and its object's storage and inventory locks are removed: a "
            "worker still running this step is cut off and its work is not committed.",
            locked_ok=True,
        ),
        _job_move(
            "job.delete",
            "Delete",
            ADMINISTRATOR,
            {J.FAILED, J.HELD},
            _to(J.DELETED),
            "deleted",
            after=_remove_work_dir,
            refusals={
                J.COMPLETED: "Completed is final in the queue (zk-tree.md); a completed job "
                "is removed with its batch (Purge now on the batch)"
            },
        ),
        _batch_move("batch.hold", "Hold", {B.PENDING}, B.HELD, "held"),
        _batch_move("batch.release", "Release", {B.HELD}, B.PENDING, "released"),
        _batch_move(
            "batch.update_reporting",
            "Report again",
            {B.FAILED},
            B.UPDATE_REPORTING,
            "report requested",
        ),
        Action(
            "batch.delete",
            "batch",
            "Delete",
            ADMINISTRATOR,
            frozenset({B.FAILED, B.HELD}),
            _batch_delete,
            refusals={
                B.COMPLETED: "Completed is final in the queue (zk-tree.md); use Purge now to "
                "remove the batch and its jobs"
            },
        ),
        Action(
            "batch.purge",
            "batch",
            "Purge now",
            ADMINISTRATOR,
            frozenset({B.COMPLETED, B.DELETED}),
            _batch_purge,
            warning="The batch and all its jobs are removed from the queue for good.",
        ),
        Action(
            "collection.hold",
            "collection",
            "Hold",
            ADMINISTRATOR,
            run=_collection("hold_collection"),
        ),
        Action(
            "collection.release",
            "collection",
            "Release",
            ADMINISTRATOR,
            run=_collection("release_collection"),
        ),
        Action(
            "collection.release_all",
            "collection",
            "Release all held items",
            ADMINISTRATOR,
            run=_collection("release_collection_items"),
        ),
        Action("queue.pause", "queue", "Pause the queue", ADMINISTRATOR, run=_queue("pause_queue")),
        Action(
            "queue.resume", "queue", "Resume the queue", ADMINISTRATOR, run=_queue("unpause_queue")
        ),
    )
}
