"""The admin actions on jobs, batches, collections and the queue: one typed action per verb
(its kind is ``steering.actions.kinds``), what it does through the queue core and which
statuses it applies to. Who may take them is ``steering.permissions``; what a confirmation
page lists is ``steering.actions.planning``; taking them is ``steering.actions.execution``.
The actions that change what a job runs (edit and resume, re-run) do it in
``steering.actions.fixes``, those that remove things in ``steering.actions.removal``, the
collection holds in ``steering.actions.collectionholds``; what an action did to an item is
``steering.actions.results``."""

from __future__ import annotations

from merritt_queue.core.records import JobRecord
from merritt_queue.core.states import JOB_STEPS, BatchStatus, JobStatus
from merritt_queue.core.store import QueueStore
from steering.actions import (
    accessqueue,
    approvals,
    breakerswitch,
    collectionholds,
    fixes,
    removal,
    reviews,
    workerdrain,
)
from steering.actions.kinds import Action, ItemAction, JobMove, Scope
from steering.actions.results import Applied, done_or_already, note_of
from steering.roles import Role

J, B = JobStatus, BatchStatus
RUNNING = frozenset({J.PENDING, *JOB_STEPS})


# --- what each action does through the core ----------------------------------------


def _to(target: str):
    return lambda store, job, params: (target, False)


def _resume(store: QueueStore, job: JobRecord, params: dict) -> tuple[str, bool]:
    step = params.get("step") or None
    target = store.edits.resume_step(job, step)
    if job.partial and target in JOB_STEPS[JOB_STEPS.index(J.STORING) :]:
        # A bulk action's job heads carry no store node, whose review may forbid Storing
        # (``core.review.latest_resume``): read it for the few jobs that would resume there.
        target = store.edits.resume_step(store.jobs.get_job(job.jid), step)
    return target, True


def _force_fail(store: QueueStore, job, params, note) -> Applied:
    return Applied(store.moves.force_fail(job, note_of(note, "force-failed")))


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


def _pause_queue(store: QueueStore, _item, params, note) -> Applied:
    return done_or_already(store.pause.pause_queue())


def _unpause_queue(store: QueueStore, _item, params, note) -> Applied:
    return done_or_already(store.pause.unpause_queue())


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
        ItemAction(
            name=reviews.APPROVE,
            scope=Scope.JOB,
            label="Approve the update",
            role=Role.OPERATOR,
            applies_to=frozenset({J.HELD}),
            run=reviews.approve_update,
            warning="The new version is stored as the job page's diff shows: the files it "
            "deletes or replaces are no longer in the object's current version.",
        ),
        ItemAction(
            name=reviews.REJECT,
            scope=Scope.JOB,
            label="Reject the update",
            role=Role.OPERATOR,
            applies_to=frozenset({J.HELD}),
            run=reviews.reject_update,
            warning="The job fails with your reason and the depositor is told as for any "
            "failed job; the object keeps its current version.",
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
            after=removal.remove_work_dir,
            refusals={
                J.COMPLETED: "Completed is final in the queue (zk-tree.md); a completed job "
                "is removed with its batch (Purge now on the batch)"
            },
        ),
        _batch_move("batch.hold", "Hold", {B.PENDING}, B.HELD, "held"),
        _batch_move("batch.release", "Release", {B.HELD}, B.PENDING, "released"),
        approvals.APPROVE,
        approvals.REJECT,
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
            removal.batch_delete,
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
            removal.batch_purge,
            applies_to=frozenset({B.COMPLETED, B.DELETED}),
            warning="The batch and all its jobs are removed from the queue for good.",
        ),
        _administrator(
            "collection.hold", Scope.COLLECTION, "Hold", collectionholds.hold_collection
        ),
        _administrator(
            "collection.release", Scope.COLLECTION, "Release", collectionholds.release_collection
        ),
        _administrator(
            "collection.release_all",
            Scope.COLLECTION,
            "Release all held items",
            collectionholds.release_collection_items,
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
        *accessqueue.ACTIONS,
    )
}
