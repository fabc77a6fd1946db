"""What the actions that remove things do through the core: a batch deleted with its Failed
and Held jobs, a batch purged, and the files they leave (a job's work directory, a batch's
upload)."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings

from merritt_queue.core.errors import QueueError
from merritt_queue.core.states import BatchStatus, JobStatus
from merritt_queue.core.store import QueueStore
from merritt_queue.deposit.uploads import remove_upload, uploads_root
from steering.actions.results import Applied, PartlyDone, note_of

J, B = JobStatus, BatchStatus


def remove_work_dir(job) -> None:
    shutil.rmtree(Path(settings.MQ_WORK_DIR) / "jobs" / job.jid, ignore_errors=True)


def batch_delete(store: QueueStore, batch, params, note) -> Applied:
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
        remove_work_dir(result)  # as a job deleted on its own
        along.append((before, result))
    if failed:  # the jobs deleted keep their audit rows; the batch waits for the rest
        raise PartlyDone(
            f"batch {batch.bid} was not deleted: {len(failed)} of its job(s) could not be "
            f"deleted ({'; '.join(failed[:3])}{' ...' if len(failed) > 3 else ''}); run the "
            "action again",
            along,
        )
    deleted = store.batch_moves.transition_batch(batch, B.DELETED, note_of(note, "deleted"))
    remove_batch_upload(batch)
    why = "not deleted, only Failed or Held jobs can be: " + ", ".join(kept) if kept else ""
    return Applied(deleted, why, tuple(along))


def remove_batch_upload(batch) -> None:
    remove_upload(uploads_root(settings.MQ_WORK_DIR), (batch.submission or {}).get("payload_url"))


def batch_purge(store: QueueStore, batch, params, note) -> Applied:
    removed = store.removal.purge_batch(batch.bid)
    remove_batch_upload(batch)
    return Applied(None, f"removed with {len(removed)} job(s)")
