"""Processing: which object a job makes a version of, whether its depositor may, and the
files Processing writes beside the content (ERC, Dublin Core, the storage manifest).

The ARK is the depositor's, the one their local id is bound to within the collection, or a
new one minted (saved to ZooKeeper before anything uses it, so a re-run never mints twice).
The minter is then told what the object is (EZID's record follows each version's metadata).
An update's ``mrt-delete.txt`` is read here, as Merritt's HandlerDescribe does.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from batches.models import Profile
from merritt_queue.core import steplog, stepowners
from merritt_queue.core.itemkeys import profile_of
from merritt_queue.core.runner import Outcome
from merritt_queue.core.store import JobRecord
from merritt_queue.core.waiting import LOCALID_WAIT
from merritt_queue.deposit import deletelist, objectfiles
from merritt_queue.deposit.manifest import ManifestError
from merritt_queue.services.errors import InventoryError, MinterError, ServiceError
from merritt_queue.services.minter import Citation
from pipeline import merritthandover, review
from pipeline.objects import change_refusal, other_collection_refusal
from pipeline.payload import job_config
from pipeline.services import Services


class ArkRefused(Exception):
    """The ARK the job would use is not this job's to use; the message says why."""


def processing(s: Services, job: JobRecord) -> Outcome:
    """Identify the object (checking who may change it), then describe its files.

    A refusal fails the job before anything is minted, bound or written."""
    config = job_config(job)
    collection = s.store.holds.item_collection(config)
    profile = _profile(s, job)
    ids = job.identifiers or {}
    if refusal := _supplied_ark_refusal(config, collection, profile):
        return Outcome.fail(refusal)
    # Read before an ARK is minted or a local id bound: a refused list leaves neither behind.
    action = deletelist.store_action(config.get("submission_mode"))
    attempt = s.current_attempt(job)
    if action == "update":
        attempt.check("move the delete list to system/")
    deleted = _take_delete_file(s.job_dir(job.jid)) if action == "update" else []
    local_ids = list(
        ids.get("local_id") or ([config["local_id"]] if config.get("local_id") else [])
    )
    if local_ids and (refusal := profile.local_ids_refusal()):
        return Outcome.fail(refusal)
    keys = localid_lock_keys(local_ids, profile) if local_ids else {}
    taken: list[str] = []
    for lid, key in keys.items():
        if not s.store.locks.lock_localid(key):
            _release_local_ids(s, taken)
            return Outcome.later(f"local id {lid} {LOCALID_WAIT}", delay=5)
        taken.append(key)
    try:
        ark, how = _resolve_ark(s, job, profile, ids.get("primary_id") or "", local_ids)
    except ArkRefused as e:
        return Outcome.fail(str(e))
    except InventoryError as e:  # Merritt's local-id service
        if not e.retryable:
            raise
        later = settings.MERRITT_INVENTORY_RETRY_SECONDS
        return Outcome.later(f"{e}; asking again later", delay=later)
    finally:
        _release_local_ids(s, taken)
    if waiting := _describe(s, ark, citation(job, profile, local_ids)):
        return waiting
    attempt.check("write the object's files")
    data = _write_object_files(s, job, ark, action, profile, deleted)
    if waits := review.hold(s, job, profile, ark, action, deleted, data, minted=how == MINTED):
        return waits
    note = f"; {len(deleted)} file(s) to delete" if deleted else ""
    return Outcome.success(f"identified as {ark}{note}", data=data)


def _supplied_ark_refusal(config: dict, collection: str, profile: Profile) -> str | None:
    """Why the depositor's own ARK may not be used (pipeline.objects).

    Only a job planned with ``primary_id`` in its configuration tells the depositor's ARK
    from one minted here on an earlier run; for the others (Merritt's, an older version's)
    ``_resolve_ark`` still refuses an ARK that belongs to another collection."""
    supplied = config.get("primary_id")
    if not supplied:
        return None
    return change_refusal(collection, supplied, profile)


def localid_lock_key(local_id: str, profile: Profile) -> str:
    """The local-id lock's name as Merritt's ingest takes it (ProcessManager: the local id,
    ``_``, the profile's owner ARK), so a job of either side waits for the other's. Only a
    profile with an owner's ARK has one: any other name would silently stop excluding
    Merritt's jobs, so ``processing`` refuses local ids without it."""
    if not profile.owner_ark:
        raise ValueError(Profile.LOCAL_IDS_REFUSED.format(name=profile.name))
    return f"{local_id}_{profile.owner_ark}"


def localid_lock_keys(local_ids: list[str], profile: Profile) -> dict[str, str]:
    """Every local-id lock a job takes: first the one Merritt's ingest would take for the
    same job (its ids joined as ``JobState.setLocalID`` joins them: trimmed, duplicates
    dropped, ``;`` between), then, when there are several, each id alone, so that two jobs
    sharing one id wait for each other whatever else they carry."""
    ids = as_merritt_joins(local_ids)
    locks = {";".join(ids): localid_lock_key(";".join(ids), profile)}
    if len(ids) > 1:
        locks.update((i, localid_lock_key(i, profile)) for i in ids)
    return locks


def as_merritt_joins(local_ids: list[str]) -> list[str]:
    """The ids as Merritt's ingest keeps them (``JobState.setLocalID``, ``MintUtil.sanitize``):
    each ``;``-separated part trimmed, duplicates dropped, in order."""
    ids = dict.fromkeys(p.strip() for lid in local_ids for p in lid.split(";"))
    return [i for i in ids if i] or local_ids


def _release_local_ids(s: Services, keys: list[str]) -> None:
    for key in keys:
        s.store.locks.unlock_localid(key)


MINTED = "minted"


def _resolve_ark(
    s: Services, job: JobRecord, profile: Profile, primary: str, local_ids: list[str]
) -> tuple[str, str]:
    """The job's ARK: supplied, bound to its local id, or newly minted (saved at once), and
    how it got it; ``ArkRefused`` when the job may not use the one it would get."""
    given = primary
    collection = s.store.holds.item_collection(job.configuration)
    merritt = s.merritt_localids_for(job.configuration)
    for lid in local_ids:
        bound = s.inventory.ark_for_local_id(collection, lid)
        if not bound and merritt is not None:
            # Bound by Merritt's own ingest: the same object, not a new one.
            bound = merritt.ark_for(profile.owner_ark, lid)
        if bound and primary and bound != primary:
            raise ArkRefused(
                f"the supplied ARK {primary} disagrees with local id {lid}, which is {bound}"
            )
        primary = primary or bound or ""
    if primary and (refusal := other_collection_refusal(collection, primary)):
        raise ArkRefused(refusal)
    saved = (job.identifiers or {}).get("primary_id") == primary and bool(primary)
    how = "given" if primary == given and primary else "bound to a local id"
    if not primary:
        how = MINTED
        shoulder = profile.minter_shoulder
        primary = s.minter.mint(shoulder, token=job.jid, citation=citation(job, profile, local_ids))
        # Saved before anything else uses it, so a retry reuses it instead of minting again;
        # from then on the minter need not remember it for this job.
        _save_identifiers(s, job, primary, local_ids)
        s.minter.forget(shoulder, job.jid)
        saved = True
    for lid in local_ids:
        bound = s.inventory.bind_local_id(collection, lid, primary)
        if bound != primary:
            raise ArkRefused(f"local id {lid} was bound to {bound} meanwhile; not using {primary}")
    if merritt is not None and local_ids:
        # As Merritt's HandlerTransfer does on every version, before storing.
        merritt.bind(primary, profile.owner_ark, as_merritt_joins(local_ids))
    if not saved:
        _save_identifiers(s, job, primary, local_ids)
    steplog.note("ark", ark=primary, how=how)
    return primary, how


def _save_identifiers(s: Services, job: JobRecord, primary: str, local_ids: list[str]) -> None:
    value = {"primary_id": primary, "local_id": local_ids}
    s.store.job_data.save_job_data(
        job.jid, "identifiers", value, exists=job.identifiers is not None
    )


def _profile(s: Services, job: JobRecord) -> Profile:
    name = profile_of(job_config(job))
    profile = s.profile(name)
    if profile is None:
        raise ServiceError(f"profile {name!r} no longer exists", retryable=False)
    return profile


def citation(job: JobRecord, profile: Profile, local_ids: list[str]) -> Citation:
    """What the minter is told of the object: the version's ERC, its local ids and ``where``
    as places, and the profile's EZID co-owner, context and kind (administrative or not)."""
    meta = job.metadata or {}
    places = [*local_ids, meta.get("erc_where") or ""]
    return Citation(
        who=meta.get("erc_who") or "",
        what=meta.get("erc_what") or "",
        when=meta.get("erc_when") or "",
        where=tuple(p for p in places if p),
        owner=profile.ezid_owner,
        creator=profile.context,
        admin=profile.administrative,
    )


def _describe(s: Services, ark: str, told: Citation) -> Outcome | None:
    """Tell the minter what the object now is, as Merritt's ingest tells EZID on every
    version. When EZID cannot be reached the step waits and runs again instead of failing:
    the ARK is saved already, so the re-run only describes, and describing twice is harmless.
    An answer no retry can mend fails the job, as in Merritt."""
    try:
        changed = s.minter.describe(ark, told)
    except MinterError as e:
        steplog.note("minter", ark=ark, ok=False)
        if not e.retryable:
            raise
        return Outcome.later(f"{e}; telling EZID again later", delay=settings.MQ_EZID_RETRY_SECONDS)
    steplog.note("minter", ark=ark, ok=True, changed=changed)
    return None


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
    written = {
        "system/mrt-erc.txt": objectfiles.erc_text(meta, ark).encode("utf-8"),
        "system/mrt-dc.xml": objectfiles.dublin_core_xml(meta, ark).encode("utf-8"),
    }
    for name, data in written.items():
        (work / name).write_bytes(data)
    entries = objectfiles.describe_files(work, objectfiles.OBJECT_SUBDIRS, written)
    objectfiles.save_description(work, entries)
    mode = deletelist.store_mode(action, profile.storage_node, ark)
    delete = deletelist.as_store_value(deleted)
    if stepowners.of_job(job.configuration) == stepowners.MERRITT_QUEUE:
        return merritthandover.store_data(
            job.jid, work, entries, node=profile.storage_node, ark=ark, mode=mode, delete=delete
        )
    manifest = work / "storage-manifest.checkm"
    manifest.write_text(objectfiles.storage_manifest(entries, work), encoding="utf-8")
    url = manifest.as_uri()
    return {
        "store": {"manifest_url": url, "mode": mode, "delete": delete},
        "inventory": {"manifest_url": url, "mode": action},
    }
