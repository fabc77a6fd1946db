"""One handler per job state: plain functions from a locked job to an Outcome.

Each step's side effects are safe to repeat, because a step whose commit was
lost (worker killed, session expired) runs again: downloads restart into a
clean directory, a minted ARK is saved to ZooKeeper before anything uses it,
storage is keyed by the job id, inventory by (ARK, version).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from django.conf import settings

from batches.models import Profile
from batches.objects import change_refusal, other_collection_refusal
from merritt_queue import deletelist, objectfiles
from merritt_queue.containers import ContainerError, unpack, unpacked_bound, unpacked_size
from merritt_queue.digest import check_digest_format, file_digests, normalise_algorithm
from merritt_queue.diskspace import percent_of_disk, percent_used_after
from merritt_queue.manifest import ManifestError, parse_manifest
from merritt_queue.runner import Outcome
from merritt_queue.safepath import inside, safe_name
from merritt_queue.services.errors import ManifestMismatch, ServiceError
from merritt_queue.services.fetch import DownloadItem
from merritt_queue.services.hostslots import HostFull
from merritt_queue.states import JobStatus
from merritt_queue.store import ItemLock, JobRecord

from . import versionfiles
from .services import Services
from .versionfiles import UNCHANGED

OBJECT_MANIFEST = "object-manifest.checkm"
# Beside a downloaded container kept while its unpacking waits for disk space: what it is
# a copy of, so only a run that would download the same thing again reuses it.
KEPT_ARCHIVE = ".kept-for-disk.json"
HEAD_SIZES = "head-sizes.json"


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
        try:
            return fn(services, job)
        except (ServiceError, ManifestError, ContainerError) as e:
            return Outcome.fail(str(e))

    return handler


def _config(job: JobRecord) -> dict:
    return job.configuration or {}


# --- Pending ---------------------------------------------------------------


def pending(s: Services, job: JobRecord) -> Outcome:
    if job.collection and s.store.collection_held(job.collection):
        return Outcome.move(JobStatus.HELD, f"collection {job.collection} is on hold")
    problem = _digest_problem(_config(job))
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
    files = _payload_files(s, job)
    unknown_urls = [f.url for f in files if f.size is None and not f.url.startswith("file:")]
    heads = s.fetcher.head_sizes(unknown_urls) if unknown_urls else {}
    _save_head_sizes(s, job, heads)
    sizes = [f.size if f.size is not None else heads.get(f.url, _local_size(f.url)) for f in files]
    total = sum(size or 0 for size in sizes)
    unknown = sum(size is None for size in sizes)
    if unknown:
        job = s.store.set_priority(job, min(99, job.priority + 1))
    note = f"; {unknown} size(s) unknown, priority lowered to {job.priority}" if unknown else ""
    message = f"{len(files)} file(s), {total} bytes{note}"
    return Outcome.success(message, job=job, data={"space_needed": total})


class PayloadFile:
    """One file a job downloads: where from, what it is called, what it must be."""

    def __init__(self, url: str, name: str, size=None, alg=None, value=None):
        # Checked as it is read from the tree: a refused name fails the job in Estimating,
        # before anything is fetched.
        self.url, self.name, self.size = url, safe_name(name), size
        self.digest = (alg, value) if alg and value else None

    def identity(self) -> dict:
        return {"url": self.url, "size": self.size, "digest": list(self.digest or ())}


def _payload_files(s: Services, job: JobRecord) -> list[PayloadFile]:
    config = _config(job)
    if config.get("payload_type") != "object-manifest":
        return [
            PayloadFile(
                config["payload_url"],
                config.get("filename") or "payload",
                config.get("file_size"),
                config.get("digest_type"),
                config.get("digest_value"),
            )
        ]
    manifest = _object_manifest(s, job)
    return [
        PayloadFile(r.url, r.file_name, r.file_size, r.hash_algorithm, r.hash_value)
        for r in manifest.rows
    ]


def _object_manifest(s: Services, job: JobRecord):
    """The job's object manifest, fetched once into its working directory."""
    url = _config(job)["payload_url"]
    path = s.job_dir(job.jid) / OBJECT_MANIFEST
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        s.fetch(url, path, max_bytes=settings.MQ_MAX_MANIFEST_BYTES)
    try:
        manifest = parse_manifest(path.read_bytes(), max_bytes=settings.MQ_MAX_MANIFEST_BYTES)
    except ManifestError as e:  # say which manifest: a batch lists many
        problems = [f"the object manifest {url} is refused:", *e.problems]
    else:
        if manifest.kind == "object":
            return manifest
        problems = [f"{url}: expected an object manifest, got a {manifest.kind} manifest"]
    # Keep only a valid copy: once the depositor fixes the manifest, a resume fetches it again.
    path.unlink(missing_ok=True)
    raise ManifestError(problems)


def _local_size(url: str) -> int | None:
    if not url.startswith("file:"):
        return None
    path = Path(url2pathname(urlsplit(url).path))
    return path.stat().st_size if path.is_file() else None


# --- Provisioning ----------------------------------------------------------


def provisioning(s: Services, job: JobRecord) -> Outcome:
    """Reserve what Downloading writes first: the files, or a container's archive (its
    unpacked size is known, and checked, once the archive is on disk)."""
    s.work_root.mkdir(parents=True, exist_ok=True)
    projected = percent_used_after(s.work_root, job.space_needed)
    threshold = settings.MQ_DISK_THRESHOLD
    if projected > threshold:
        return Outcome.later(
            f"waiting for disk space: the working disk would be {projected:.0f}% full "
            f"with this job's {job.space_needed} bytes (threshold {threshold}%)",
            delay=settings.MQ_PROVISION_RETRY_SECONDS,
        )
    return Outcome.success(f"working disk {projected:.0f}% full after this job")


def _save_head_sizes(s: Services, job: JobRecord, heads: dict[str, int | None]) -> None:
    """Keep what the HEADs said: Downloading stops a file that grows past it."""
    path = s.job_dir(job.jid) / HEAD_SIZES
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({u: n for u, n in heads.items() if n is not None}))


def _head_sizes(s: Services, job: JobRecord) -> dict[str, int]:
    try:
        sizes = json.loads((s.job_dir(job.jid) / HEAD_SIZES).read_text())
    except (OSError, ValueError):  # estimated on another host, or by an older version
        return {}
    return {u: n for u, n in sizes.items() if isinstance(n, int)} if isinstance(sizes, dict) else {}


# --- Downloading -----------------------------------------------------------


def downloading(s: Services, job: JobRecord) -> Outcome:
    """Download under a slot per remote host, each file stopped at the size learned for it.

    A job whose host already has ``MQ_MAX_DOWNLOADS_PER_HOST`` downloads in flight waits,
    its worker free, rather than join them: one depositor's slow server must not occupy
    every worker.
    """
    files = _payload_files(s, job)
    try:
        lease = _host_slots(s, files)
    except HostFull as full:
        return Outcome.later(
            f"waiting for a download slot: {full.host} already has {full.limit} "
            "download(s) in flight (MQ_MAX_DOWNLOADS_PER_HOST)",
            delay=settings.MQ_HOST_WAIT_SECONDS,
        )
    bounded = dataclasses.replace(s, fetcher=s.fetcher.with_declared_sizes(_head_sizes(s, job)))
    with lease:
        return _download(bounded, job, files)


def _host_slots(s: Services, files: list[PayloadFile]):
    """A held slot on every remote host of ``files`` (nothing to hold without HostSlots)."""
    if s.host_slots is None:
        return nullcontext()
    return s.host_slots.hold({urlsplit(f.url).hostname for f in files} - {None})


def _download(s: Services, job: JobRecord, files: list[PayloadFile]) -> Outcome:
    work = s.job_dir(job.jid)
    producer = work / "producer"
    shutil.rmtree(producer, ignore_errors=True)  # a re-run starts clean
    producer.mkdir(parents=True)
    if _config(job).get("payload_type") == "container":
        waiting = _download_container(s, job, work, producer, files[0])
        if waiting:
            return waiting
    else:
        _download_files(s, producer, files)
    total = sum(p.stat().st_size for p in producer.rglob("*") if p.is_file())
    count = sum(1 for p in producer.rglob("*") if p.is_file())
    message = f"downloaded {count} file(s), {total} bytes"
    return Outcome.success(message, data={"space_needed": total})


def _download_files(s: Services, producer: Path, files: list[PayloadFile]) -> None:
    targets = [(f, inside(producer, f.name)) for f in files]
    remote = []
    for f, target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        if f.url.startswith("file:"):
            s.fetch(f.url, target)
            _check_local(target, f)
        else:
            remote.append(DownloadItem(f.url, target, f.size, f.digest))
    if remote:
        s.fetcher.download_many(remote)


def _check_local(path: Path, f: PayloadFile) -> None:
    if f.digest:
        alg = normalise_algorithm(f.digest[0])
        got = file_digests(path, [alg])[alg]
        if got.lower() != f.digest[1].lower():
            raise ServiceError(
                f"{alg} mismatch for {f.name}: expected {f.digest[1]}, got {got}", retryable=False
            )


def _download_container(
    s: Services, job: JobRecord, work: Path, producer: Path, f: PayloadFile
) -> Outcome | None:
    """Download and unpack the container; an Outcome when it must wait or fail instead."""
    archive = inside(work / "container", f.name)
    kept = archive.parent / KEPT_ARCHIVE
    if not (archive.is_file() and _kept_for(kept) == f.identity()):
        kept.unlink(missing_ok=True)
        archive.parent.mkdir(parents=True, exist_ok=True)
        s.fetch(f.url, archive, digest=f.digest, size=f.size)
        if f.url.startswith("file:"):
            _check_local(archive, f)
    refused = _unpack_refused(s, job, archive, f)
    if refused:
        return refused
    kept.unlink(missing_ok=True)
    shutil.rmtree(producer)
    unpack(archive, producer, **_unpack_limits())
    return None


def _unpack_limits() -> dict[str, int]:
    """The configured limits of a container, the same for its listing and its unpacking."""
    return {
        "max_total_bytes": settings.MQ_MAX_CONTAINER_BYTES,
        "max_depth": settings.MQ_CONTAINER_MAX_DEPTH,
        "max_path_bytes": settings.MQ_CONTAINER_MAX_PATH_BYTES,
    }


def _unpack_refused(s: Services, job: JobRecord, archive: Path, f: PayloadFile) -> Outcome | None:
    """Provisioning reserved the archive; its unpacked size must fit the disk too.

    Waits (keeping the archive) while other work holds the space, fails when the archive and
    its contents would take more than the threshold of the whole disk: they never can fit."""
    limit, threshold = settings.MQ_MAX_CONTAINER_BYTES, settings.MQ_DISK_THRESHOLD
    size = archive.stat().st_size
    # The archive is on the disk already; the most it may unpack to is known without reading
    # it, and when even that fits, reading the listing (a tar.gz decompressed) is not needed.
    if percent_used_after(s.work_root, unpacked_bound(size, limit)) <= threshold:
        return None
    unpacked = unpacked_size(archive, **_unpack_limits())
    projected = percent_used_after(s.work_root, unpacked)
    if projected <= threshold:
        return None
    if job.space_needed != size + unpacked:  # the job page shows what it waits for
        s.store.set_space_needed(job.jid, size + unpacked)
    share = percent_of_disk(s.work_root, size + unpacked)
    if share > threshold:
        archive.unlink(missing_ok=True)
        return Outcome.fail(
            f"{f.name} unpacks to {unpacked} bytes: with the archive that is {share:.0f}% of "
            f"the working disk, more than MQ_DISK_THRESHOLD ({threshold}%) allows even with "
            "nothing else on it; give the working disk more space or raise the threshold, "
            "then resume the job"
        )
    archive.parent.joinpath(KEPT_ARCHIVE).write_text(json.dumps(f.identity()))
    return Outcome.later(
        f"waiting for disk space to unpack {f.name}: its {unpacked} bytes would take the "
        f"working disk to {projected:.0f}% (threshold {threshold}%); the archive is kept",
        delay=settings.MQ_PROVISION_RETRY_SECONDS,
    )


def _kept_for(kept: Path) -> dict | None:
    try:
        return json.loads(kept.read_text())
    except (OSError, ValueError):
        return None


# --- Processing ------------------------------------------------------------


def processing(s: Services, job: JobRecord) -> Outcome:
    """Identify the object (checking who may change it), then describe its files.

    A refusal fails the job before anything is minted, bound or written."""
    config = _config(job)
    collection = job.collection or ""
    profile = _profile(job)
    ids = job.identifiers or {}
    if refusal := _supplied_ark_refusal(config, collection, profile):
        return Outcome.fail(refusal)
    # Read before an ARK is minted or a local id bound: a refused list leaves neither behind.
    action = deletelist.store_action(config.get("submission_mode"))
    deleted = _take_delete_file(s.job_dir(job.jid)) if action == "update" else []
    local_ids = list(
        ids.get("local_id") or ([config["local_id"]] if config.get("local_id") else [])
    )
    held = [lid for lid in local_ids if not s.store.lock_localid(f"{collection}:{lid}")]
    if held:
        _release_local_ids(s, collection, [i for i in local_ids if i not in held])
        return Outcome.later(f"local id {held[0]} is being resolved by another job", delay=5)
    try:
        ark = _resolve_ark(s, job, collection, ids.get("primary_id") or "", local_ids)
    finally:
        _release_local_ids(s, collection, local_ids)
    if ark.startswith("error:"):
        return Outcome.fail(ark[len("error:") :])
    data = _write_object_files(s, job, ark, action, profile, deleted)
    note = f"; {len(deleted)} file(s) to delete" if deleted else ""
    return Outcome.success(f"identified as {ark}{note}", data=data)


def _supplied_ark_refusal(config: dict, collection: str, profile: Profile) -> str | None:
    """Why the depositor's own ARK may not be used (batches.objects).

    Only a job planned with ``primary_id`` in its configuration tells the depositor's ARK
    from one minted here on an earlier run; for the others (Merritt's, an older version's)
    ``_resolve_ark`` still refuses an ARK that belongs to another collection."""
    supplied = config.get("primary_id")
    if not supplied:
        return None
    return change_refusal(collection, supplied, profile)


def _release_local_ids(s: Services, collection: str, local_ids: list[str]) -> None:
    for lid in local_ids:
        s.store.unlock_localid(f"{collection}:{lid}")


def _resolve_ark(
    s: Services, job: JobRecord, collection: str, primary: str, local_ids: list[str]
) -> str:
    """The job's ARK: supplied, bound to its local id, or newly minted (saved at once)."""
    for lid in local_ids:
        bound = s.inventory.ark_for_local_id(collection, lid)
        if bound and primary and bound != primary:
            return (
                f"error:the supplied ARK {primary} disagrees with local id {lid}, which is {bound}"
            )
        primary = primary or bound or ""
    if primary and (refusal := other_collection_refusal(collection, primary)):
        return f"error:{refusal}"
    saved = (job.identifiers or {}).get("primary_id") == primary and bool(primary)
    if not primary:
        shoulder = _shoulder(job)
        primary = s.minter.mint(shoulder, token=job.jid, **_erc(job))
        # Saved before anything else uses it, so a retry reuses it instead of minting again;
        # from then on the minter need not remember it for this job.
        _save_identifiers(s, job, primary, local_ids)
        s.minter.forget(shoulder, job.jid)
        saved = True
    for lid in local_ids:
        bound = s.inventory.bind_local_id(collection, lid, primary)
        if bound != primary:
            return f"error:local id {lid} was bound to {bound} meanwhile; not using {primary}"
    if not saved:
        _save_identifiers(s, job, primary, local_ids)
    return primary


def _save_identifiers(s: Services, job: JobRecord, primary: str, local_ids: list[str]) -> None:
    value = {"primary_id": primary, "local_id": local_ids}
    s.store.save_job_data(job.jid, "identifiers", value, exists=job.identifiers is not None)


def _shoulder(job: JobRecord) -> str:
    return _profile(job).minter_shoulder


def _profile(job: JobRecord) -> Profile:
    profile = Profile.objects.filter(name=_config(job).get("profile")).first()
    if profile is None:
        raise ServiceError(
            f"profile {_config(job).get('profile')!r} no longer exists", retryable=False
        )
    return profile


def _erc(job: JobRecord) -> dict[str, str]:
    meta = job.metadata or {}
    return {key: meta.get(f"erc_{key}", "") for key in ("who", "what", "when", "where")}


def _take_delete_file(work: Path) -> list[str]:
    """The names an update's ``mrt-delete.txt`` removes; the file itself moved to ``system/``
    first, as Merritt's HandlerDescribe does, so it is stored as the job's record of the
    deletion and not as content. A re-run finds it there already."""
    source = work / "producer" / deletelist.DELETE_FILE
    target = work / "system" / deletelist.DELETE_FILE
    if not source.is_file():
        return deletelist.parse_delete_file(target.read_bytes()) if target.is_file() else []
    try:
        names = deletelist.parse_delete_file(source.read_bytes())
    except ManifestError as e:  # say which file: the problems name only its lines
        raise ManifestError(
            [f"the update's delete list producer/{deletelist.DELETE_FILE} is refused:", *e.problems]
        ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    source.replace(target)
    return names


def _write_object_files(
    s: Services, job: JobRecord, ark: str, action: str, profile: Profile, deleted: list[str]
) -> dict:
    """Write the object's files; the ``store`` and ``inventory`` data that point at them,
    in the shape Merritt's ingest writes (``mode`` is its storage path for the store)."""
    work = s.job_dir(job.jid)
    system = work / "system"
    system.mkdir(parents=True, exist_ok=True)
    meta = job.metadata or {}
    (system / "mrt-erc.txt").write_text(objectfiles.erc_text(meta, ark), encoding="utf-8")
    (system / "mrt-dc.xml").write_text(objectfiles.dublin_core_xml(meta, ark), encoding="utf-8")
    entries = objectfiles.describe_files(work, objectfiles.OBJECT_SUBDIRS)
    objectfiles.save_description(work, entries)
    manifest = work / "storage-manifest.checkm"
    manifest.write_text(objectfiles.storage_manifest(entries, work), encoding="utf-8")
    url = manifest.as_uri()
    return {
        "store": {
            "manifest_url": url,
            "mode": deletelist.store_mode(action, profile.storage_node, ark),
            "delete": deletelist.as_store_value(deleted),
        },
        "inventory": {"manifest_url": url, "mode": action},
    }


# --- Storing ---------------------------------------------------------------


def storing(s: Services, job: JobRecord) -> Outcome:
    ark = _ark(job)
    action, delete = _store_request(job)
    if not s.store.lock_storage(ark, owner=job.jid):
        return Outcome.later(f"{ark} is being stored by another job", delay=10)
    with _held(s, ItemLock("storage", ark, owner=job.jid)) as lock:
        work = s.job_dir(job.jid)
        entries = objectfiles.object_files(work)
        files = [(e["name"], inside(work, e["name"])) for e in entries]
        manifest = [
            {"name": e["name"], "size": e["size"], "digests": {"sha256": e["sha256"]}}
            for e in entries
        ]
        try:
            version = s.storage.store_version(
                ark, work, files, token=job.jid, manifest=manifest, mode=action, delete=delete
            )
        except ManifestMismatch as e:
            raise ManifestMismatch(
                f"{e}\nThe working copy changed after Processing described it: resume the job "
                "from Processing to describe and store the files as they are now.",
                retryable=e.retryable,
            ) from None
    versionfiles.save(work, version, entries, action)
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
        store.get("mode"), default=_config(job).get("submission_mode", "add")
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
        s.store.release(lock)
        raise


def _ark(job: JobRecord) -> str:
    ark = (job.identifiers or {}).get("primary_id")
    if not ark:
        raise ServiceError("the job has no ARK: resume it from Processing", retryable=False)
    return ark


# --- Recording -------------------------------------------------------------


def recording(s: Services, job: JobRecord) -> Outcome:
    ark = _ark(job)
    version = (job.store or {}).get("version")
    if not version:
        return Outcome.fail("no stored version is recorded for this job: resume it from Storing")
    if (job.store or {}).get("outcome") == UNCHANGED:
        return Outcome.success(f"{UNCHANGED}: nothing to record; {ark} stays at version {version}")
    if not s.store.lock_inventory(ark):
        return Outcome.later(f"{ark} is being recorded by another job", delay=5)
    with _held(s, ItemLock("inventory", ark)) as lock:
        stored = versionfiles.load(s.job_dir(job.jid), s.storage, ark, version)
        s.inventory.record(
            ark=ark,
            version=version,
            job_id=job.jid,
            collection=job.collection or "",
            files=stored.files,
            deleted=stored.deleted,
            mode=stored.mode,
            metadata=job.metadata,
        )
    return Outcome.success(f"recorded {ark} version {version} in inventory", unlock=(lock,))


# --- Notify ----------------------------------------------------------------


def notify(s: Services, job: JobRecord) -> Outcome:
    config = _config(job)
    profile = Profile.objects.filter(name=config.get("profile")).first()
    if profile and profile.callback_url:
        # The same key on every run of this step: a receiver can drop a repeated notification.
        s.notifier.notify(
            profile.callback_url, _callback_payload(job), idempotency_key=f"{job.jid}:notify"
        )
    shutil.rmtree(s.job_dir(job.jid), ignore_errors=True)
    note = (
        f"callback {profile.callback_url} answered"
        if profile and profile.callback_url
        else "no callback"
    )
    if (job.store or {}).get("outcome") == UNCHANGED:
        return Outcome.success(f"completed, {UNCHANGED}; {note}")
    return Outcome.success(f"completed; {note}")


def _callback_payload(job: JobRecord) -> dict:
    ids = job.identifiers or {}
    return {
        "job_id": job.jid,
        "batch_id": job.bid,
        "batchID": _config(job).get("batchID"),
        "status": "Completed",
        "ark": ids.get("primary_id"),
        "local_id": ids.get("local_id") or [],
        "version": (job.store or {}).get("version"),
        "outcome": (job.store or {}).get("outcome") or "stored",
        "title": (job.metadata or {}).get("erc_what"),
    }
