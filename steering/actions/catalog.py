"""The admin actions on jobs, batches, collections and the queue: one typed action per verb,
what it does through the queue core and which statuses it applies to. Who may take them is
``steering.permissions``; what a confirmation page lists is ``steering.actions.planning``;
taking them is ``steering.actions.execution``. The actions that change what a job runs (edit
and resume, re-run) do it in ``steering.actions.fixes``; what an action did to an item is
``steering.actions.results``."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from django.conf import settings

from batches.models import mnemonic_problem
from merritt_queue.core.errors import QueueError
from merritt_queue.core.records import JobRecord
from merritt_queue.core.states import JOB_STEPS, BatchStatus, JobStatus
from merritt_queue.core.store import QueueStore
from merritt_queue.deposit.uploads import remove_upload, uploads_root
from steering.actions import breakerswitch, fixes, workerdrain
from steering.actions.results import Applied, ItemResult, PartlyDone, note_of
from steering.roles import Role

J, B = JobStatus, BatchStatus
RUNNING = frozenset({J.PENDING, *JOB_STEPS})


class Scope(StrEnum):
    """What an action acts on; also the audit trail's ``scope`` column."""

    JOB = "job"
    BATCH = "batch"
    COLLECTION = "collection"
    QUEUE = "queue"
    WORKER = "worker"
    DEPENDENCY = "dependency"


@dataclass(frozen=True)
class Target:
    """An item as shown on the confirmation page, or as read again when acting on it."""

    id: str
    status: str = ""
    version: int | None = None
    collection: str = ""
    locked: bool = False


@dataclass(frozen=True, kw_only=True)
class Action:
    """One verb. ``check`` is the judgement made on the confirmation page and made again on
    a fresh read when acting; ``apply`` acts on items that passed it."""

    name: str
    scope: Scope
    label: str
    role: Role  # the least role that may take it
    applies_to: frozenset[str] = frozenset()  # statuses; empty for collections and the queue
    warning: str = ""
    locked_ok: bool = False  # may act on an item a worker holds
    # Why the action does not apply to a status, where "it applies to X" would not help.
    refusals: dict = field(default_factory=dict, repr=False)
    # Whether execution hands it its items a chunk at a time (pipelined) or one by one.
    batched: bool = False
    # The page an item's button opens instead of the confirmation page (a URL name taking
    # the item's id): an action with a form of its own, taken on one item at a time.
    form: str = ""
    form_many: str = ""  # the form's page for a selection (a URL name taking no argument)

    def check(self, t: Target, collections: set[str] | None) -> str | None:
        """Why the action may not be taken on ``t`` by a person limited to ``collections``
        (None: all), or None."""
        if self.scope == Scope.WORKER and collections is not None:
            return "a worker runs the jobs of every collection; your role covers only some"
        if self.scope == Scope.DEPENDENCY and collections is not None:
            return "a dependency serves the jobs of every collection; your role covers only some"
        if self.scope == Scope.COLLECTION and (why := mnemonic_problem(t.id)):
            return why
        if self.applies_to and t.status in self.refusals:
            return f"it is {t.status}: {self.refusals[t.status]}"
        if self.applies_to and t.status not in self.applies_to:
            allowed = ", ".join(sorted(self.applies_to))
            return f"it is {t.status}; {self.label.lower()} applies to {allowed}"
        if t.locked and not self.locked_ok:
            return "a worker is running a step on it (locked)"
        collection = t.id if self.scope == Scope.COLLECTION else t.collection
        if collections is not None and collection not in collections:
            return f"collection {collection or '(none)'} is outside your collections"
        return None

    def apply(self, store: QueueStore, items: Sequence, params: dict, note: str) -> list:
        """Act on ``items`` (records read, or ids); one ``ItemResult`` per item, in order."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class ItemAction(Action):
    """An action taken on one item at a time: ``run(store, item, params, note) -> Applied``."""

    run: Callable[[QueueStore, Any, dict, str], Applied] = field(repr=False)

    def apply(self, store: QueueStore, items: Sequence, params: dict, note: str) -> list:
        results: list[ItemResult] = []
        for item in items:
            try:
                results.append(self.run(store, item, params, note))
            except QueueError as e:
                results.append(e)
        return results


@dataclass(frozen=True, kw_only=True)
class JobMove(Action):
    """A job action that is one status move, so execution pipelines it: a chunk of jobs is
    moved in one round of multis, one job or thousands alike."""

    # ``move(store, job, params) -> (status, retry)``; ``after(job)`` once it is written.
    move: Callable[[QueueStore, JobRecord, dict], tuple[str, bool]] = field(repr=False)
    after: Callable[[JobRecord], None] | None = field(default=None, repr=False)
    what: str = ""  # the past tense the job's message gets: "resumed by <who>: <reason>"
    refused_in_deleted_batch: bool = False  # a move that would bring a job back to work
    scope: Scope = Scope.JOB
    batched: bool = True

    def apply(self, store: QueueStore, items: Sequence, params: dict, note: str) -> list:
        deleted = self._deleted_batches(store, items)
        results: list[ItemResult | None] = [None] * len(items)
        moves, where = [], []
        for i, job in enumerate(items):
            try:
                if job.bid in deleted:
                    raise QueueError(
                        f"job {job.jid} was not moved: its batch {job.bid} is Deleted. "
                        "Submit the object again in a new batch instead."
                    )
                target, retry = self.move(store, job, params)
            except QueueError as e:
                results[i] = e
                continue
            moves.append((job, target, note_of(note, self.what), retry))
            where.append(i)
        with store.changes.deferred():
            written = store.moves.move_jobs(moves)
        for i, result in zip(where, written, strict=True):
            if isinstance(result, QueueError):
                results[i] = result
                continue
            if self.after is not None:
                self.after(result)
            results[i] = Applied(result)
        return results

    def _deleted_batches(self, store: QueueStore, jobs: Sequence[JobRecord]) -> set[str]:
        """Of the jobs' batches, those that are Deleted, read in one pipelined round; only
        for a move that would bring a job back to work, which would recreate its batch's
        ``batch-processing``, and MerrittZK's reporting throws on a Deleted batch it finds
        there (issue 13)."""
        if not self.refused_in_deleted_batch:
            return set()
        bids = {job.bid for job in jobs if job.bid}
        if not bids:
            return set()
        statuses = store.batches.batch_statuses(bids)
        return {bid for bid, got in statuses.items() if got.get("status") == B.DELETED}


# --- what each action does through the core ----------------------------------------


def _to(target: str):
    return lambda store, job, params: (target, False)


def _resume(store: QueueStore, job: JobRecord, params: dict) -> tuple[str, bool]:
    return store.edits.resume_step(job, params.get("step") or None), True


def _remove_work_dir(job) -> None:
    shutil.rmtree(Path(settings.MQ_WORK_DIR) / "jobs" / job.jid, ignore_errors=True)


def _force_fail(store: QueueStore, job, params, note) -> Applied:
    return Applied(store.moves.force_fail(job, note_of(note, "force-failed")))


def _batch_delete(store: QueueStore, batch, params, note) -> Applied:
    """The batch with its Failed and Held jobs, or nothing when a job still works.

    The jobs go first: the queue deletes a batch only once none of its jobs is left in
    batch-processing (zk-tree.md), where a Held job stays. A job still at work refuses the
    whole action before anything is written. The jobs are read and moved in pipelined rounds
    (``job_heads``, ``move_jobs``), not one round trip each: a batch can hold thousands.
    """
    jids = [jid for group in store.batches.batch_jobs(batch.bid).values() for jid in group]
    heads = store.jobs.job_heads(jids)
    message = note_of(note, f"deleted with batch {batch.bid}")
    moves, working, kept = [], [], []
    for jid in jids:
        job = heads[jid]
        if isinstance(job, QueueError):
            raise job
        if job.status in (J.FAILED, J.HELD):
            moves.append((job, J.DELETED, message, False))
        elif job.status == J.COMPLETED:
            kept.append(f"{jid} ({job.status})")
        elif job.status != J.DELETED:
            working.append(f"{jid} ({job.status})")
    if working:
        raise QueueError(
            f"batch {batch.bid} was not deleted: {len(working)} of its job(s) are not finished "
            f"yet ({', '.join(working[:10])}{' ...' if len(working) > 10 else ''}); let them "
            "finish, or fail them, then delete the batch"
        )
    with store.changes.deferred():
        written = store.moves.move_jobs(moves)
    along, failed = [], []
    for (before, *_), result in zip(moves, written, strict=True):
        if isinstance(result, QueueError):
            failed.append(f"{before.jid}: {result}")
            continue
        _remove_work_dir(result)  # as a job deleted on its own
        along.append((before, result))
    if failed:  # the jobs deleted keep their audit rows; the batch waits for the rest
        raise PartlyDone(
            f"batch {batch.bid} was not deleted: {len(failed)} of its job(s) could not be "
            f"deleted ({'; '.join(failed[:3])}{' ...' if len(failed) > 3 else ''}); run the "
            "action again",
            along,
        )
    deleted = store.batch_moves.transition_batch(batch, B.DELETED, note_of(note, "deleted"))
    _remove_upload(batch)
    why = "not deleted, only Failed or Held jobs can be: " + ", ".join(kept) if kept else ""
    return Applied(deleted, why, tuple(along))


def _remove_upload(batch) -> None:
    remove_upload(uploads_root(settings.MQ_WORK_DIR), (batch.submission or {}).get("payload_url"))


def _batch_purge(store: QueueStore, batch, params, note) -> Applied:
    removed = store.removal.purge_batch(batch.bid)
    _remove_upload(batch)
    return Applied(None, f"removed with {len(removed)} job(s)")


def _batch_move(name: str, label: str, applies_to, target: str, what: str) -> ItemAction:
    """An operator's action that moves a batch from ``applies_to`` to ``target``."""

    def run(store: QueueStore, batch, params, note) -> Applied:
        return Applied(store.batch_moves.transition_batch(batch, target, note_of(note, what)))

    return ItemAction(
        name=name,
        scope=Scope.BATCH,
        label=label,
        role=Role.OPERATOR,
        applies_to=frozenset(applies_to),
        run=run,
    )


def _changed(changed: bool) -> Applied:
    return Applied(None, "done" if changed else "already so")


def _hold_collection(store: QueueStore, mnemonic: str, params, note) -> Applied:
    by, _, reason = note.partition(": ")
    return _changed(store.holds.hold_collection(mnemonic, by=by, reason=reason))


def _release_collection(store: QueueStore, mnemonic: str, params, note) -> Applied:
    """Lift the holds this side placed; those Merritt's admin set only when the person
    ticked ``also_others`` on the confirmation page (``ALSO_OTHERS``). Then, as the person
    chose (``CAUGHT``), release the items the hold caught, or keep them Held saying so.

    Caught items are released only once no hold covers the collection: one still held by
    another tool would only hold them again, so they wait for that hold, as the dispatcher
    would have them wait (``follow_collection_holds``)."""
    also = bool(params.get(ALSO_OTHERS))
    changed = store.holds.release_collection(mnemonic, also_others=also)
    kept = [name for name, ours in store.holds.collection_holds(mnemonic).items() if not ours]
    words = ["done" if changed else "already so"]
    if kept:
        words.append(kept_words(kept))
    if params.get(CAUGHT) == KEEP_CAUGHT:
        result = store.held.keep_caught_items(
            mnemonic, note_of(note, "kept on hold when the hold was lifted")
        )
        words.append(f"kept {len(result.released)} item(s) its hold caught on hold")
    elif kept:
        words.append("the items its hold caught stay Held until those holds are lifted too")
        return Applied(None, "; ".join(words))
    else:
        result = store.held.release_collection_items(
            mnemonic, note_of(note, "released with the collection's hold"), by_hold_only=True
        )
        words.append(f"released {len(result.released)} item(s) its hold caught")
    if result.skipped:
        words.append(_not_done(result.skipped))
    return Applied(None, "; ".join(words), tuple(result.moved))


def _not_done(skipped: dict[str, str]) -> str:
    return "not done: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())


# The confirmation page's checkbox: also lift the holds another tool placed.
ALSO_OTHERS = "also_others"
ALSO_OTHERS_REASON = "also lifting the holds Merritt's admin or another tool set"
# The confirmation page's choice for the items the hold caught: released with it (the
# default), or kept Held.
CAUGHT = "caught"
KEEP_CAUGHT = "keep"
KEEP_CAUGHT_REASON = "keeping on hold the items the hold caught"


def kept_words(names: list[str]) -> str:
    return (
        f"the hold(s) Merritt's admin or another tool set under {', '.join(names)} stay "
        "(tick the box on the confirmation page to lift them too)"
    )


def _release_collection_items(store: QueueStore, mnemonic: str, params, note) -> Applied:
    result = store.held.release_collection_items(mnemonic, note_of(note, "released"))
    skipped = "; ".join(f"{k}: {v}" for k, v in result.skipped.items())
    return Applied(
        None,
        f"released {len(result.released)} item(s)"
        + (f"; not released: {skipped}" if skipped else ""),
        tuple(result.moved),
    )


def _pause_queue(store: QueueStore, _item, params, note) -> Applied:
    return _changed(store.pause.pause_queue())


def _unpause_queue(store: QueueStore, _item, params, note) -> Applied:
    return _changed(store.pause.unpause_queue())


def _administrator(name: str, scope: Scope, label: str, run, **extra) -> ItemAction:
    return ItemAction(
        name=name, scope=scope, label=label, role=Role.ADMINISTRATOR, run=run, **extra
    )


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        JobMove(
            name="job.hold",
            label="Hold",
            role=Role.OPERATOR,
            applies_to=frozenset({J.PENDING}),
            move=_to(J.HELD),
            what="held",
        ),
        JobMove(
            name="job.release",
            label="Release",
            role=Role.OPERATOR,
            applies_to=frozenset({J.HELD}),
            move=_to(J.PENDING),
            what="released",
            refused_in_deleted_batch=True,
        ),
        JobMove(
            name="job.resume",
            label="Resume",
            role=Role.OPERATOR,
            applies_to=frozenset({J.FAILED}),
            move=_resume,
            what="resumed",
            refused_in_deleted_batch=True,
        ),
        ItemAction(
            name="job.edit_resume",
            scope=Scope.JOB,
            label="Edit and resume",
            role=Role.OPERATOR,
            applies_to=frozenset({J.FAILED}),
            run=fixes.edit_resume,
            form="steering:edit_job",
            form_many="steering:edit_jobs",
        ),
        _administrator(
            "job.force_fail",
            Scope.JOB,
            "Force fail",
            _force_fail,
            applies_to=RUNNING,
            warning="The job's lock and its object's storage and inventory locks are removed: a "
            "worker still running this step is cut off and its work is not committed.",
            locked_ok=True,
        ),
        JobMove(
            name="job.delete",
            label="Delete",
            role=Role.ADMINISTRATOR,
            applies_to=frozenset({J.FAILED, J.HELD}),
            move=_to(J.DELETED),
            what="deleted",
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
        _administrator(
            "batch.delete",
            Scope.BATCH,
            "Delete",
            _batch_delete,
            applies_to=frozenset({B.FAILED, B.HELD}),
            warning="Deleting cannot be undone: the batch and the jobs listed with it are "
            "deleted, and the depositor is not notified.",
            refusals={
                B.COMPLETED: "Completed is final in the queue (zk-tree.md); use Purge now to "
                "remove the batch and its jobs"
            },
        ),
        _administrator(
            "job.rerun",
            Scope.JOB,
            "Re-run as a new version",
            fixes.job_rerun,
            applies_to=frozenset({J.COMPLETED}),
            warning="A new batch runs the job again from its payload URL: its object gets "
            "its next version, or stays as it is when the bytes are the same.",
        ),
        _administrator(
            "batch.rerun",
            Scope.BATCH,
            "Re-run as a new version",
            fixes.batch_rerun,
            applies_to=frozenset({B.COMPLETED}),
            warning="A new batch runs every Completed job of the batch again from its payload "
            "URL: each object gets its next version, or stays as it is when the bytes are the "
            "same.",
        ),
        _administrator(
            "batch.purge",
            Scope.BATCH,
            "Purge now",
            _batch_purge,
            applies_to=frozenset({B.COMPLETED, B.DELETED}),
            warning="The batch and all its jobs are removed from the queue for good.",
        ),
        _administrator("collection.hold", Scope.COLLECTION, "Hold", _hold_collection),
        _administrator("collection.release", Scope.COLLECTION, "Release", _release_collection),
        _administrator(
            "collection.release_all",
            Scope.COLLECTION,
            "Release all held items",
            _release_collection_items,
        ),
        ItemAction(
            name="worker.drain",
            scope=Scope.WORKER,
            label="Drain",
            role=Role.OPERATOR,
            applies_to=frozenset({workerdrain.WORKING}),
            run=workerdrain.drain,
            warning="The worker finishes the step it is running, then takes no more work "
            "until it is undrained; other workers take the queue's jobs meanwhile.",
        ),
        ItemAction(
            name="worker.undrain",
            scope=Scope.WORKER,
            label="Undrain",
            role=Role.OPERATOR,
            applies_to=frozenset({workerdrain.DRAINED}),
            run=workerdrain.undrain,
        ),
        _administrator(
            "dependency.open",
            Scope.DEPENDENCY,
            "Open the breaker",
            breakerswitch.open_breaker,
            applies_to=frozenset({breakerswitch.CLOSED}),
            warning="No step calls the dependency until a person closes the breaker: the jobs "
            "that need it wait in their state (never failed for it), and it is not probed.",
        ),
        _administrator(
            "dependency.close",
            Scope.DEPENDENCY,
            "Close the breaker",
            breakerswitch.close_breaker,
            applies_to=frozenset({breakerswitch.OPEN}),
            warning="The jobs that wait for the dependency go on at their next try: if it is "
            "still down, its breaker opens again after MQ_BREAKER_THRESHOLD failures.",
        ),
        _administrator("queue.pause", Scope.QUEUE, "Pause the queue", _pause_queue),
        _administrator("queue.resume", Scope.QUEUE, "Resume the queue", _unpause_queue),
    )
}
