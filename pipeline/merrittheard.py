"""Notify of a ``merritt-queue`` job: our inventory hears what Merritt stored.

Merritt's storage and inventory consumers stored and recorded the job, and nothing of that
reaches our inventory tables, which our object pages, search, exports, local-id resolution
and collection checks read. So, before the job is notified, the version storage made is
read back from storage's state (``MerrittStorageClient`` on ``MERRITT_STORAGE_URL`` and
the node of the job's ``store`` mode) and recorded as Recording records a local job's.

Neither the store node nor ZooKeeper carries the number storage gave the version. It is
the newest version that holds every file this job handed over (name, size and digest, as
Processing described them for the add-manifest), whose predecessor does not hold them all,
and that our inventory does not hold from another job: the current one, unless another
job's version of the object was stored since.

Guarantees: a version is recorded once (a re-run finds it in our inventory by the job,
without asking storage); while storage cannot be read the job waits in Notify, never
failed; storage holding no version with this job's files fails it, saying so.
"""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings

from merritt_queue.core.records import JobRecord
from merritt_queue.core.runner import Outcome
from merritt_queue.deposit import deletelist, objectfiles
from merritt_queue.services.errors import StorageError
from merritt_queue.services.merrittstorage import MerrittStorageClient
from merritt_queue.services.versions import StoredFile, StoredVersion, diff
from pipeline import versionfiles
from pipeline.services import Services


def record(s: Services, job: JobRecord, ark: str) -> int | Outcome:
    """The version number recorded for ``job``, or an Outcome to wait in Notify."""
    if (recorded := s.inventory.version_of_job(ark, job.jid)) is not None:
        return recorded
    mode = (job.store or {}).get("mode")
    action = deletelist.store_action(mode)
    try:
        storage = _storage(s, mode)
        entries = objectfiles.object_files(s.job_dir(job.jid))
        stored = _stored_version(s, storage, ark, job.jid, entries)
        version = versionfiles.from_storage(storage, stored, entries, action)
    except StorageError as e:
        if not e.retryable:
            raise
        return Outcome.later(
            f"Merritt storage could not be read to record {ark} in our inventory: {e}; "
            "reading it again later",
            delay=settings.MERRITT_STORAGE_RETRY_SECONDS,
        )
    s.inventory.record(
        ark=ark,
        version=version.version,
        job_id=job.jid,
        collection=s.store.holds.item_collection(job.configuration),
        files=version.files,
        deleted=version.deleted,
        mode=version.mode,
        metadata=job.metadata,
    )
    return version.version


def _storage(s: Services, mode: object) -> MerrittStorageClient:
    parts = mode.split("/") if isinstance(mode, str) else []
    if len(parts) < 3 or not parts[1]:
        raise StorageError(
            f"the job's store node names no storage node in its mode {mode!r}: resume it from "
            "Processing",
            retryable=False,
        )
    if s.merritt_storage is None:
        raise StorageError(
            "MERRITT_STORAGE_URL is not set on this worker, which reads what Merritt stored "
            "of a merritt-queue job: set it and restart the worker",
            retryable=True,
        )
    return s.merritt_storage.on_node(parts[1])


def _stored_version(
    s: Services, storage: MerrittStorageClient, ark: str, jid: str, entries: list[dict]
) -> StoredVersion:
    """The version this job made, with what it changed since the one before."""
    if not entries:
        raise StorageError(
            f"the working files of job {jid} are gone, so the version Merritt stored of {ark} "
            "cannot be told from the others: resume the job from Processing",
            retryable=False,
        )
    others = s.inventory.versions_by_other_jobs(ark, jid)
    numbers = storage.versions(ark)
    read: dict[int, StoredVersion] = {}

    def files_of(number: int) -> list[StoredFile]:
        if number not in read:
            read[number] = storage.get_version(ark, number)
        return read[number].files

    # A later version that carried this job's files holds them too: the job's own is the
    # one they arrived in. A job that sent again what the object held makes a version
    # whose predecessor holds them as well; then the newest is taken.
    fallback = None
    for number in reversed(numbers):
        if number in others or not _holds(files_of(number), entries):
            continue
        before = files_of(number - 1) if number > 1 else None
        if before is None or not _holds(before, entries):
            return replace(read[number], changes=diff(before, read[number].files))
        fallback = fallback or replace(read[number], changes=diff(before, read[number].files))
    if fallback is not None:
        return fallback
    raise StorageError(
        f"storage node {storage.node_id} holds no version of {ark} with the files job {jid} "
        f"handed over ({len(numbers)} version(s) read): check that MERRITT_STORAGE_URL is "
        "the storage service Merritt's consumers store to",
        retryable=False,
    )


def _holds(files: list[StoredFile], entries: list[dict]) -> bool:
    held = {f.name: f for f in files}
    for e in entries:
        f = held.get(e["name"])
        if f is None or f.size != e["size"]:
            return False
        digests = [(a, f.digests[a]) for a in ("sha256", "md5") if f.digests.get(a) and e.get(a)]
        if not digests or any(value != e[a] for a, value in digests):
            return False
    return True
