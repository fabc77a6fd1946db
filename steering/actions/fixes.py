"""The actions that change what a job runs: a failed job's parameters edited before it is
resumed (``job.edit_resume``), and Completed work run again as a new version
(``job.rerun``, ``batch.rerun``). Their entries are in ``steering.actions.catalog``."""

from __future__ import annotations

from django.conf import settings

from merritt_queue.core import jobparams, rerun, tree
from merritt_queue.core.errors import ChangedUnderYou, QueueError
from merritt_queue.core.records import JobRecord
from merritt_queue.core.sides import CREATED_BY, CREATED_BY_KEY, NONE
from merritt_queue.core.states import BatchStatus
from merritt_queue.core.store import QueueStore
from steering.actions.results import Applied, note_of

B = BatchStatus


def edit_resume(store: QueueStore, job: JobRecord, params: dict, note: str) -> Applied:
    """The edit confirmed (``params["changes"]``: field -> [before, after]; for a selection,
    ``params["each"]``: job -> its changes) written and the job resumed, in one multi;
    refused when a field no longer holds the value shown."""
    changes = (params.get("each") or {}).get(job.jid) or params.get("changes") or {}
    now = jobparams.current(job.configuration, job.identifiers, job.metadata)
    moved = [name for name, (before, _) in changes.items() if now.get(name, "") != before]
    if moved:
        # A data node keeps no history: the value now is all there is to say of the change.
        what = "; ".join(
            f"{name} is now {jobparams.shown(now.get(name, ''))} "
            f"(the page showed {jobparams.shown(changes[name][0])})"
            for name in moved
        )
        raise ChangedUnderYou(f"changed since the page was shown: {what}; edit it again")
    if (
        job.bid
        and store.batches.batch_statuses([job.bid]).get(job.bid, {}).get("status") == B.DELETED
    ):
        raise QueueError(
            f"job {job.jid} was not resumed: its batch {job.bid} is Deleted. "
            "Submit the object again in a new batch instead."
        )
    names = ", ".join(changes)
    after = store.edits.edit_job_parameters(
        job,
        {name: new for name, (_, new) in changes.items()},
        to=params.get("step") or None,
        message=note_of(note, f"edited ({names}) and resumed"),
    )
    return Applied(after, jobparams.describe(changes))


def job_rerun(store: QueueStore, job: JobRecord, params: dict, note: str) -> Applied:
    """A new batch that runs the Completed job again as the object's next version
    (``core.rerun``); the job itself stays as it is."""
    if why := rerun.rerun_refusal(job.configuration):
        raise QueueError(f"job {job.jid} was not re-run: {why}")
    old = (store.batches.get_batch(job.bid).submission or {}) if job.bid else {}
    return _rerun(store, job.bid or "", old or (job.configuration or {}), [job.jid], note)


def batch_rerun(store: QueueStore, batch, params, note) -> Applied:
    """A new batch that runs every Completed job of the batch again."""
    return _rerun(store, batch.bid, batch.submission or {}, [], note)


def _rerun(store: QueueStore, bid: str, old: dict, jids: list[str], note: str) -> Applied:
    if settings.MQ_WORKERS == NONE:
        raise QueueError(
            "this queue runs no ingest workers (MQ_WORKERS=none): nothing would run it"
        )
    by = note.partition(": ")[0]
    submission = rerun.rerun_submission(old, bid, jids, by, tree.now())
    submission[CREATED_BY_KEY] = CREATED_BY  # ours: MerrittZK never takes it
    # No approval wait even for a profile that asks for one: the person re-running it, with a
    # reason, is the person who decides (a depositor's re-run waits: door.submission).
    created = store.new_batches.create_rerun_batch(old.get("batchID") or bid, submission)
    uuid = store.batches.get_batch(created.id).uuid
    return Applied(
        None,
        f"re-run as batch {created.id} (batchID {uuid}); each object gets its next version, "
        "or stays as it is when the bytes are the same",
    )
