"""Batch handlers: turn a Pending batch into jobs; report a batch whose jobs are done.

Guarantees: a batch stays Pending (and locked) while its jobs are created and
moves to Processing only when all exist, so creation interrupted by a crash
is simply run again, skipping rows that already have a job. A bad manifest
fails the batch with every problem listed, creates no job and leaves no file in the
working directory.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from types import SimpleNamespace

from django.conf import settings
from django.core.mail import send_mail

from batches.models import Profile
from merritt_queue.core.errors import ChangedUnderYou, InvalidData, LockLost
from merritt_queue.core.planning import (
    MANIFEST_KIND,
    batch_priority,
    manifest_kind_problem,
    plan_jobs,
)
from merritt_queue.core.rerun import RERUN_TYPE, plan_rerun, rerun_refusal
from merritt_queue.core.sides import NONE, reports_batch, runs_batch
from merritt_queue.core.states import BatchStatus
from merritt_queue.core.store import BatchRecord, NewJob
from merritt_queue.deposit.manifest import ManifestError, parse_manifest
from merritt_queue.deposit.uploads import remove_upload
from merritt_queue.project.breakerboard import breakers as site_breakers
from merritt_queue.services.errors import ServiceError
from merritt_queue.services.smtpbreaker import send_through
from pipeline import capacity
from pipeline.services import Services
from pipeline.versionfiles import UNCHANGED

log = logging.getLogger(__name__)

# What a handler returns for a batch our workers leave to Merritt's own ingest.
MERRITT = "merritt"


def run_pending(s: Services, bid: str) -> str:
    """Create the jobs of a Pending batch; what happened, in a word."""
    store = s.store
    if settings.MQ_WORKERS == NONE:
        return "refused"
    if store.pause.queue_paused():
        return "paused"
    batch = store.batch_locks.begin_batch(
        bid, runs=lambda submission: runs_batch(settings.MQ_WORKERS, submission)
    )
    if batch is None:
        return "skipped"
    if not runs_batch(settings.MQ_WORKERS, batch.submission):
        store.batch_locks.unlock_batch(batch)  # Merritt's ingest takes it: left as it was
        return MERRITT
    try:
        message = create_jobs(s, batch)
    except (LockLost, ChangedUnderYou) as e:
        log.warning("batch %s creation abandoned: %s", bid, e)
        return "abandoned"
    except (ManifestError, ServiceError, ValueError, InvalidData) as e:
        # The batch's message lists the problems; the refused manifest on disk would only linger.
        shutil.rmtree(s.batch_dir(bid), ignore_errors=True)
        _fail_unplanned(s, batch, f"no jobs were created: {e}")
        return "failed"
    except BaseException:
        store.batch_locks.unlock_batch(batch)  # retried by the next sweep instead of staying locked
        raise
    store.batch_moves.start_processing(batch, message, jobs_written=True)
    return "processing"


def create_jobs(s: Services, batch: BatchRecord) -> str:
    submission = batch.submission or {}
    if submission.get("type") == RERUN_TYPE:
        specs = plan_rerun(submission, _rerun_sources(s, submission))
    else:
        manifest = _manifest(s, batch) if submission.get("type") in MANIFEST_KIND else None
        specs = plan_jobs(submission, manifest)
    if not specs:
        raise ManifestError(["the manifest lists no objects"])
    profile = Profile.objects.filter(name=submission.get("profile")).first()
    priority = batch_priority(profile.default_priority if profile else 5, len(specs))
    done = _existing_rows(s, batch.bid)
    new = [
        NewJob(spec.configuration, priority, identifiers=spec.identifiers, metadata=spec.metadata)
        for spec in specs
        if spec.row not in done
    ]
    # The exact row count is known only now for a manifest given by URL; a crash's rerun
    # adds only the rows it had not written.
    capacity.check(s.store, submission.get("collection", ""), len(specs), new=len(new))
    # The new rows reach the mirror a second's worth at a time, not a transaction each.
    with s.store.changes.deferred(max_delay=settings.MQ_MIRROR_DELAY):
        s.store.new_jobs.create_jobs(batch.bid, new)
    message = f"{len(specs)} job(s) created at priority {priority}"
    if profile and profile.notify_on_queue:
        body = f"{len(specs)} object(s) were queued for ingest."
        mail_error = _mail(batch, f"Batch {batch.bid} queued", body)
        message += f"; {mail_error}" if mail_error else ""
    return message


def _manifest(s: Services, batch: BatchRecord):
    submission = batch.submission
    assert submission is not None
    path = s.batch_dir(batch.bid) / "manifest.checkm"
    path.parent.mkdir(parents=True, exist_ok=True)
    s.fetch(submission["payload_url"], path, max_bytes=settings.MQ_MAX_MANIFEST_BYTES)
    manifest = parse_manifest(path.read_bytes(), max_bytes=settings.MQ_MAX_MANIFEST_BYTES)
    problem = manifest_kind_problem(submission["type"], manifest)
    if problem:
        raise ManifestError([problem])
    return manifest


def _rerun_sources(s: Services, submission: dict) -> list:
    """The Completed jobs a re-run batch runs again, read now in pipelined rounds: those it
    lists, or every Completed job of the batch it re-runs. Any other is a problem: the batch
    fails saying which, and creates no job."""
    old = str(submission.get("rerun_of") or "")
    listed = [str(j) for j in submission.get("rerun_jobs") or []]
    jids = listed or s.store.batches.batch_jobs(old)["batch-completed"]
    if not jids:
        raise ManifestError([f"batch {old} has no Completed job to re-run (purged?)"])
    nodes = {
        name: s.store.jobs.job_node_values(jids, name)
        for name in ("status", "configuration", "identifiers", "metadata")
    }
    problems, jobs = [], []
    for jid in jids:
        status = (nodes["status"][jid] or {}).get("status")
        if status != "Completed":
            problems.append(f"job {jid} is {status or 'gone (purged?)'}, not Completed")
            continue
        if why := rerun_refusal(nodes["configuration"][jid]):
            problems.append(f"job {jid}: {why}")
            continue
        jobs.append(SimpleNamespace(jid=jid, **{n: nodes[n][jid] for n in nodes if n != "status"}))
    if problems:
        raise ManifestError([f"the re-run of batch {old} is refused:", *problems])
    return jobs


def _existing_rows(s: Services, bid: str) -> set[int | None]:
    jids = [j for group in s.store.batches.batch_jobs(bid).values() for j in group]
    configurations = s.store.jobs.job_node_values(jids, "configuration")
    return {(c or {}).get("batch_row") for c in configurations.values()}


def _fail_unplanned(s: Services, batch: BatchRecord, message: str) -> None:
    """Pending -> Processing -> Failed: the batch machine has no direct Pending -> Failed."""
    moved = s.store.batch_moves.start_processing(batch, "checking the submission")
    s.store.batch_moves.transition_batch(moved, BatchStatus.FAILED, message)
    _mail(batch, f"Batch {batch.bid} failed", message)


# --- reporting ---------------------------------------------------------------


def run_report(s: Services, bid: str, status: str) -> str:
    """Report a batch whose jobs are all finished, then Completed or Failed.

    Finished means ``batch-processing`` exists and is empty, checked under the lock, in
    every reporting status: Merritt's ingest sets Reporting as soon as it has created the
    jobs, and MerrittZK too reports only once the last job has left."""
    store = s.store
    if settings.MQ_WORKERS == NONE:
        return "refused"
    batch = store.batch_locks.lock_batch(bid)
    if batch is None:
        return "skipped"
    if not reports_batch(settings.MQ_WORKERS, batch.submission):
        store.batch_locks.unlock_batch(batch)
        return MERRITT
    if batch.status != status or not store.batches.batch_is_finished(bid):
        store.batch_locks.unlock_batch(batch)
        return "not ready"
    try:
        if batch.status == BatchStatus.PROCESSING:
            batch = store.batch_moves.transition_batch(batch, BatchStatus.REPORTING, "reporting")
        final, message = report(s, batch)
        # ``batch`` was read before the report was written, and the commit hands its record to
        # the mirror's write-through, which would otherwise keep the old (often empty) report.
        batch = replace(batch, status_report=store.batches.get_batch(bid).status_report)
        # MerrittZK's reporter reads a batch's status before it takes the lock, and writes
        # its own report on what it read: one that read this batch just before this report
        # would report it again if it found the lock gone. The lock stays a little longer.
        store.batch_moves.transition_batch(
            batch,
            final,
            message,
            release_lock=True,
            release_after=settings.MQ_REPORT_LOCK_GRACE,
        )
    except (LockLost, ChangedUnderYou) as e:
        log.warning("batch %s report abandoned: %s", bid, e)
        return "abandoned"
    except BaseException:
        store.batch_locks.unlock_batch(batch)  # retried by the next sweep instead of staying locked
        raise
    _release_upload(s, batch)
    return final.lower()


def _release_upload(s: Services, batch: BatchRecord) -> None:
    """Remove the batch's uploaded payload once no job of it can be resumed to read it.

    ``batch`` carries the status report just written: its count of failed jobs, not a
    listing of the batch's directories (a big batch's run to thousands of names)."""
    report = batch.status_report or {}
    if report.get("failed_count") or report.get("failed_jobs"):
        return  # a Failed job resumed from Downloading copies the upload again
    remove_upload(s.uploads_root, (batch.submission or {}).get("payload_url"))


def report(s: Services, batch: BatchRecord) -> tuple[str, str]:
    jobs = s.store.batches.batch_jobs(batch.bid)
    failed, done, deleted = jobs["batch-failed"], jobs["batch-completed"], jobs["batch-deleted"]
    previous = batch.status_report or {}
    s.store.batch_moves.write_status_report(batch.bid, failed, done)
    message = f"{len(done)} completed, {len(failed)} failed, {len(deleted)} deleted"
    body = _summary(s, batch, failed, done, deleted, previous)
    mail_error = _mail(batch, f"Batch {batch.bid}: {message}", body)
    callback_error = _batch_callback(s, batch, failed, done, deleted)
    errors = [e for e in (mail_error, callback_error) if e]
    if errors:
        return BatchStatus.FAILED, "; ".join([message, *errors])
    return (BatchStatus.FAILED if failed else BatchStatus.COMPLETED), message


def _summary(s, batch, failed, done, deleted, previous) -> str:
    lines = [f"Batch {batch.bid} ({batch.uuid or 'no batchID'})", ""]
    identifiers = s.store.jobs.job_node_values(done, "identifiers")
    stores = s.store.jobs.job_node_values(done, "store")
    statuses = s.store.jobs.job_node_values(failed, "status")
    for jid in done:
        ark = (identifiers[jid] or {}).get("primary_id", "")
        stored = stores[jid] or {}
        if stored.get("outcome") == UNCHANGED:
            note = f"version {stored.get('version')} already holds these files"
            lines.append(f"unchanged  {jid}  {ark}  ({UNCHANGED}: {note})")
        else:
            version = f"  version {stored['version']}" if stored.get("version") else ""
            lines.append(f"completed  {jid}  {ark}{version}")
    for jid in failed:
        lines.append(f"FAILED     {jid}  {(statuses[jid] or {}).get('message', '')}")
    lines += [f"deleted    {jid}" for jid in deleted]
    if previous:
        was_failed = set(previous.get("failed_jobs", []))
        shown = len(was_failed)
        total = previous.get("failed_count", shown)
        if isinstance(total, int) and total > shown:
            # The report node keeps a bounded list (store.batch_moves.write_status_report).
            note = f"it listed {shown} of its {total} failed jobs"
            lines += ["", f"Since the last report ({note}):"]
        else:
            lines += ["", "Since the last report:"]
        lines += [f"now completed  {j}" for j in done if j in was_failed]
        lines += [f"still failed   {j}" for j in failed if j in was_failed]
        lines += [f"now deleted    {j}" for j in deleted if j in was_failed]
    return "\n".join(lines) + "\n"


def _recipients(batch: BatchRecord) -> list[str]:
    submission = batch.submission or {}
    profile = Profile.objects.filter(name=submission.get("profile")).first()
    return (profile.emails if profile else []) or list(submission.get("notification") or [])


def _mail(batch: BatchRecord, subject: str, body: str) -> str | None:
    """E-mail the batch's recipients; why it could not be sent, or None."""
    recipients = _recipients(batch)
    if not recipients:
        return None
    try:
        send_through(
            site_breakers(),
            lambda: send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients),
        )
    except OSError as e:  # SMTP errors are OSErrors too: say so instead of leaving it locked
        log.warning("batch %s: e-mail %r not sent: %s", batch.bid, subject, e)
        return f"the e-mail to {', '.join(recipients)} could not be sent: {type(e).__name__}: {e}"
    return None


def _batch_callback(s, batch, failed, done, deleted) -> str | None:
    profile = Profile.objects.filter(name=(batch.submission or {}).get("profile")).first()
    if not profile or not profile.callback_url:
        return None
    payload = {
        "batch_id": batch.bid,
        "batchID": batch.uuid,
        "completed_jobs": done,
        "failed_jobs": failed,
        "deleted_jobs": deleted,
    }
    try:
        # The same key when a killed worker's report is run again (same status version),
        # so the receiver drops the repeat; a later UpdateReporting is a new report.
        key = f"{batch.bid}:{batch.status}:{batch.status_version}"
        s.notifier.notify(profile.callback_url, payload, idempotency_key=key)
    except ServiceError as e:
        return str(e)
    return None
