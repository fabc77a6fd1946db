"""One handler per job state: plain functions from a locked job to an Outcome.

The table is here with the short steps; Downloading (``download.py``) and Processing
(``identify.py``) have modules of their own, and ``payload.py`` is what both Estimating and
Downloading read of the job's submission.

Each step's side effects are safe to repeat, because a step whose commit was
lost (worker killed, session expired) runs again: downloads go into the attempt's own
staging folder and are published by rename, a minted ARK is saved to ZooKeeper before
anything uses it, storage is keyed by the job id, inventory by (ARK, version). Two attempts
can run at once (one cut off from ZooKeeper): every side effect outside ZooKeeper passes
the attempt's fence first (``core/attempt.py``).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from merritt_queue.core import review, steplog, stepowners, waiting
from merritt_queue.core.attempt import Attempt
from merritt_queue.core.attempt import current as current_attempt
from merritt_queue.core.itemkeys import profile_of
from merritt_queue.core.runner import Decision, Outcome
from merritt_queue.core.states import JobStatus
from merritt_queue.core.store import ItemLock, JobRecord
from merritt_queue.deposit import deletelist, objectfiles
from merritt_queue.deposit.containers import ContainerError
from merritt_queue.deposit.digest import check_digest_format, normalise_algorithm
from merritt_queue.deposit.diskspace import percent_used_after
from merritt_queue.deposit.manifest import ManifestError
from merritt_queue.deposit.safepath import inside_each
from merritt_queue.services.breakerguard import Refusals, waiting_on
from merritt_queue.services.errors import InventoryError, ManifestMismatch, ServiceError
from pipeline import merrittheard, versionfiles
from pipeline import review as reviewing
from pipeline.download import downloading, undeclared_bytes
from pipeline.identify import processing
from pipeline.payload import job_config, known_sizes, payload_files, save_head_sizes
from pipeline.services import Services
from pipeline.versionfiles import UNCHANGED


def handlers(services: Services) -> dict:
    """The handler of each working state, bound to this process's services."""
    table = {
        JobStatus.PENDING: pending,
        JobStatus.ESTIMATING: estimating,
        JobStatus.PROVISIONING: provisioning,
        JobStatus.DOWNLOADING: downloading,
        JobStatus.PROCESSING: processing,
        JobStatus.STORING: storing,
        JobStatus.RECORDING: recording,
        JobStatus.NOTIFY: notify,
    }
    return {status: _bind(fn, services) for status, fn in table.items()}


def _bind(fn, services):
    def handler(job: JobRecord) -> Outcome:
        attempt = current_attempt() or Attempt.unfenced(job.jid, job.status)
        with Refusals() as refused:
            try:
                outcome = fn(services.for_attempt(attempt), job)
            except ServiceError as e:
                if down := waiting_on(e):  # its breaker is open: wait, never fail for it
                    return Outcome.later(str(e), delay=down.wait)
                return Outcome.fail(str(e))
            except (ManifestError, ContainerError) as e:
                return Outcome.fail(str(e))
        return _until_probe(outcome, refused)

    return handler


def _until_probe(outcome: Outcome, refused: Refusals) -> Outcome:
    """A step that turned a breaker's refusal into a wait of its own (Processing's "telling
    EZID again later") waits at least until the breaker's next probe: sooner, it would only
    be refused again."""
    if outcome.action != Decision.LATER or outcome.delay >= refused.wait:
        return outcome
    return dataclasses.replace(outcome, delay=refused.wait)


# --- Pending ---------------------------------------------------------------


def pending(s: Services, job: JobRecord) -> Outcome:
    if why := s.store.holds.item_hold(job.configuration):
        return Outcome.move(JobStatus.HELD, why)
    problem = _digest_problem(job_config(job))
    if problem:
        return Outcome.fail(problem)
    s.job_dir(job.jid).mkdir(parents=True, exist_ok=True)
    return Outcome.success("working directory ready")


def _digest_problem(config: dict) -> str | None:
    alg, value = config.get("digest_type"), config.get("digest_value")
    if not alg and not value:
        return None
    if not (alg and value):
        return "the depositor's digest is incomplete: it needs both a type and a value"
    try:
        return check_digest_format(normalise_algorithm(alg), value)
    except ValueError as e:
        return str(e)


# --- Estimating ------------------------------------------------------------


def estimating(s: Services, job: JobRecord) -> Outcome:
    files = payload_files(s, job)
    unknown_urls = [f.url for f in files if f.size is None and not f.url.startswith("file:")]
    heads = s.fetcher.head_sizes(unknown_urls) if unknown_urls else {}
    save_head_sizes(s, job, heads)
    sizes = known_sizes(files, heads)
    total = sum(size or 0 for size in sizes)
    unknown = sum(size is None for size in sizes)
    note = ""
    if unknown:
        reserve = undeclared_bytes(s, unknown)
        if reserve <= 0:
            return Outcome.later(
                f"{waiting.DISK_WAIT}: the working disk is at its threshold "
                f"({settings.MQ_DISK_THRESHOLD}%), so nothing can be reserved for "
                f"{unknown} file(s) of undeclared size",
                delay=settings.MQ_PROVISION_RETRY_SECONDS,
            )
        job = s.store.job_data.set_priority(job, min(99, job.priority + 1))
        total += unknown * reserve
        note = (
            f"; {unknown} size(s) unknown, {reserve} bytes reserved for each, "
            f"priority lowered to {job.priority}"
        )
    message = f"{len(files)} file(s), {total} bytes{note}"
    return Outcome.success(message, job=job, data={"space_needed": total})


# --- Provisioning ----------------------------------------------------------


def provisioning(s: Services, job: JobRecord) -> Outcome:
    """Reserve what Downloading writes first: the files, or a container's archive (its
    unpacked size is known, and checked, once the archive is on disk)."""
    s.work_root.mkdir(parents=True, exist_ok=True)
    projected = percent_used_after(s.work_root, job.space_needed)
    threshold = settings.MQ_DISK_THRESHOLD
    if projected > threshold:
        return Outcome.later(
            f"{waiting.DISK_WAIT}: the working disk would be {projected:.0f}% full "
            f"with this job's {job.space_needed} bytes (threshold {threshold}%)",
            delay=settings.MQ_PROVISION_RETRY_SECONDS,
        )
    return Outcome.success(f"working disk {projected:.0f}% full after this job")


# --- Storing ---------------------------------------------------------------


def storing(s: Services, job: JobRecord) -> Outcome:
    if why := review.stores(job):
        return Outcome.fail(f"not stored: {why}")
    ark = _ark(job)
    action, delete = _store_request(job)
    attempt = s.current_attempt(job)
    # A stale attempt must not take the lock back from a newer one of the same job.
    attempt.check(f"take the storage lock of {ark}")
    taken = s.store.locks.lock_storage(ark, owner=job.jid)
    if taken is None:
        return Outcome.later(f"{ark} {waiting.STORAGE_WAIT}", delay=10)
    with _held(s, taken) as lock:
        if review.review_of(job):
            # Under the storage lock, so no other job stores a version between the two.
            versions = s.storage_for(job.configuration).versions(ark)
            if why := reviewing.changed(job, max(versions) if versions else None):
                s.store.locks.release_lock(lock)
                return Outcome.fail(f"not stored: {why}")
        work = s.job_dir(job.jid)
        entries = objectfiles.object_files(work)
        names = [e["name"] for e in entries]
        files = list(zip(names, inside_each(work, names), strict=True))
        manifest = [
            {"name": e["name"], "size": e["size"], "digests": {"sha256": e["sha256"]}}
            for e in entries
        ]
        attempt.check(f"store {ark}")
        try:
            version = s.storage_for(job.configuration).store_version(
                ark, work, files, token=job.jid, manifest=manifest, mode=action, delete=delete
            )
        except ManifestMismatch as e:
            raise ManifestMismatch(
                f"{e}\nThe working copy changed after Processing described it: resume the job "
                "from Processing to describe and store the files as they are now.",
                retryable=e.retryable,
            ) from None
    versionfiles.save(work, version, entries, action)
    steplog.note(
        "storage",
        ark=ark,
        version=version.version,
        files=len(version.files),
        unchanged=version.unchanged,
        ok=True,
    )
    data = dict(job.store or {}) | {"version": version.version}
    if version.unchanged:
        data["outcome"] = UNCHANGED
        message = f"{UNCHANGED}: {ark} version {version.version} already holds exactly these files"
    else:
        message = f"stored {ark} version {version.version} ({versionfiles.summary(version)})"
    return Outcome.success(message, data={"store": data}, unlock=(lock,))


def _store_request(job: JobRecord) -> tuple[str, list[str]]:
    """add or update, and the names to delete, from the store node Processing (or Merritt's
    ingest) wrote; the submission's mode when it says nothing."""
    store = job.store or {}
    action = deletelist.store_action(
        store.get("mode"), default=job_config(job).get("submission_mode", "add")
    )
    delete = deletelist.from_store_value(store.get("delete")) if action == "update" else []
    return action, delete


@contextmanager
def _held(s: Services, lock: ItemLock) -> Iterator[ItemLock]:
    """A lock the step took: released here if the step raises, else handed to its outcome
    (``Outcome.success(unlock=...)``) to go in the commit."""
    try:
        yield lock
    except BaseException:
        s.store.locks.release_lock(lock)
        raise


def _ark(job: JobRecord) -> str:
    ark = (job.identifiers or {}).get("primary_id")
    if not ark:
        raise ServiceError("the job has no ARK: resume it from Processing", retryable=False)
    return ark


# --- Recording -------------------------------------------------------------


def recording(s: Services, job: JobRecord) -> Outcome:
    """Record the stored version in this project's inventory tables; in ``merritt-api``
    mode first in Merritt's inventory, so that our pages never show a version Merritt's
    inventory refused. Both are safe to repeat: Merritt's inventory takes an object it holds
    already as added, ours a version this job recorded."""
    ark = _ark(job)
    version = (job.store or {}).get("version")
    if not version:
        return Outcome.fail("no stored version is recorded for this job: resume it from Storing")
    if (job.store or {}).get("outcome") == UNCHANGED:
        return Outcome.success(f"{UNCHANGED}: nothing to record; {ark} stays at version {version}")
    if not s.store.locks.lock_inventory(ark):
        return Outcome.later(f"{ark} {waiting.INVENTORY_WAIT}", delay=5)
    merritt_api = stepowners.of_job(job.configuration) == stepowners.MERRITT_API
    with _held(s, ItemLock("inventory", ark)) as lock:
        storage = s.storage_for(job.configuration)
        stored = versionfiles.load(s.job_dir(job.jid), storage, ark, version)
        if merritt_api and (wait := _add_to_merritt_inventory(s, job, ark, lock)):
            return wait
        s.inventory.record(
            ark=ark,
            version=version,
            job_id=job.jid,
            collection=s.store.holds.item_collection(job.configuration),
            files=stored.files,
            deleted=stored.deleted,
            mode=stored.mode,
            metadata=job.metadata,
        )
        steplog.note("inventory", ark=ark, version=version, ok=True)
    where = " and in Merritt's inventory" if merritt_api else ""
    return Outcome.success(f"recorded {ark} version {version} in inventory{where}", unlock=(lock,))


def _add_to_merritt_inventory(
    s: Services, job: JobRecord, ark: str, lock: ItemLock
) -> Outcome | None:
    """Add the object to Merritt's inventory from storage's manifest; an Outcome to wait
    (the lock released) while inventory cannot be reached, None once it is added."""
    inventory, manifest_url = s.merritt_inventory_for(job.configuration, ark)
    try:
        inventory.add(manifest_url)
    except InventoryError as e:
        if not e.retryable:
            raise
        s.store.locks.release_lock(lock)
        return Outcome.later(
            f"{e}; adding again later", delay=settings.MERRITT_INVENTORY_RETRY_SECONDS
        )
    return None


# --- Notify ----------------------------------------------------------------


def notify(s: Services, job: JobRecord) -> Outcome:
    """Notify the depositor's callback; a ``merritt-queue`` job's version is first recorded
    in our inventory (``merrittheard``), its number then in the store node and the payload."""
    data = None
    if stepowners.of_job(job.configuration) == stepowners.MERRITT_QUEUE:
        heard = merrittheard.record(s, job, _ark(job))
        if isinstance(heard, Outcome):
            return heard
        data = {"store": dict(job.store or {}) | {"version": heard}}
        job = dataclasses.replace(job, store=data["store"])
    config = job_config(job)
    profile = s.profile(profile_of(config))
    attempt = s.current_attempt(job)
    if profile and profile.callback_url:
        attempt.check("notify the callback")
        # The same key on every run of this step: a receiver can drop a repeated notification.
        s.notifier.notify(
            profile.callback_url, _callback_payload(job), idempotency_key=f"{job.jid}:notify"
        )
    attempt.check("remove the working folder")
    shutil.rmtree(s.job_dir(job.jid), ignore_errors=True)
    note = (
        f"callback {profile.callback_url} answered"
        if profile and profile.callback_url
        else "no callback"
    )
    if (job.store or {}).get("outcome") == UNCHANGED:
        return Outcome.success(f"completed, {UNCHANGED}; {note}", data=data)
    if data:
        note = f"{_ark(job)} version {data['store']['version']} in our inventory; {note}"
    return Outcome.success(f"completed; {note}", data=data)


def _callback_payload(job: JobRecord) -> dict:
    ids = job.identifiers or {}
    return {
        "job_id": job.jid,
        "batch_id": job.bid,
        "batchID": job_config(job).get("batchID"),
        "status": "Completed",
        "ark": ids.get("primary_id"),
        "local_id": ids.get("local_id") or [],
        "version": (job.store or {}).get("version"),
        "outcome": (job.store or {}).get("outcome") or "stored",
        "title": (job.metadata or {}).get("erc_what"),
    }
