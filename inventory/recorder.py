"""Recording stored versions in the local inventory tables.

Guarantees: recording the same (ARK, version) twice writes nothing the second
time (a Recording step re-run after a crash is harmless), recording it from
another job is refused, and so is a version naming a file twice; a local id is
bound to one ARK forever, the first binding winning a race.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime

from django.db import IntegrityError, transaction

from inventory.idsearch import ark_keys
from inventory.models import (
    CHANGES,
    MODES,
    InventoryFile,
    InventoryObject,
    InventoryVersion,
    LocalIdentifier,
)
from merritt_queue.services.errors import InventoryError
from merritt_queue.services.versions import StoredFile
from mirror import sql


def check_changes(ark: str, version: int, files: list[dict], deleted: list[str], mode: str):
    """Refuse what the pages could not show truthfully, before anything is written."""
    where = f"{ark} version {version}"
    if mode and mode not in MODES:
        raise InventoryError(
            f"{where}: mode {mode!r} is neither {' nor '.join(MODES)}", retryable=False
        )
    for f in files:
        change = f.get("change") or ""
        if change and change not in CHANGES:
            raise InventoryError(
                f"{where}: file {f.get('name')!r} has change {change!r}; "
                f"it must be one of {', '.join(CHANGES)}",
                retryable=False,
            )
    bad = [name for name in deleted if not isinstance(name, str) or not name]
    if bad:
        raise InventoryError(
            f"{where}: deleted names must be non-empty file names, not {bad[0]!r}",
            retryable=False,
        )


class LocalInventory:
    def record(
        self,
        *,
        ark: str,
        version: int,
        job_id: str,
        collection: str,
        files: list[dict],
        metadata: dict | None = None,
        deleted: Iterable[str] = (),
        mode: str = "",
    ) -> bool:
        """Record one stored version; False when it was already recorded by the same job.

        ``files`` are every file of the version, carried ones included, each dict with
        ``name``, ``size``, ``sha256`` and optionally ``md5``, ``mime_type`` and ``change``
        (added, replaced or carried); ``deleted`` names the files the version removed.
        """
        if isinstance(deleted, str):  # list() would record its characters as names
            raise InventoryError(
                f"{ark} version {version}: deleted must be a list of names, not the text "
                f"{deleted[:80]!r}; split the delete list into names first",
                retryable=False,
            )
        deleted = list(deleted)
        check_changes(ark, version, files, deleted, mode)
        # No existence query ahead of the inserts: their own uniqueness answers, and the
        # holder of the version is looked up only when one refuses. A first version is
        # nearly always of a new object, inserted without looking for it first; a later
        # one, or a first whose object is there already, finds its object.
        new_object = version == 1
        args = (ark, version, job_id, collection, files, metadata or {}, deleted, mode)
        while True:
            try:
                with transaction.atomic():
                    self._insert(*args, new_object=new_object)
                return True
            except IntegrityError as e:  # recorded already (maybe by a twin step just now)
                if _recorded_by(ark, version, job_id):
                    return False
                if not new_object:
                    raise InventoryError(
                        f"{ark} version {version} could not be recorded: {e}", retryable=False
                    ) from e
                new_object = False  # the object was there: go again as a later version

    @staticmethod
    def _insert(ark, version, job_id, collection, files, metadata, deleted, mode, *, new_object):
        stored = datetime.now(UTC)
        described = {
            "title": metadata.get("erc_what"),
            "creator": metadata.get("erc_who"),
            "date": metadata.get("erc_when"),
        }
        # A new object is written whole at once: this version is its only one.
        new = {
            "collection": collection,
            **{name: value for name, value in described.items() if value},
            "version_count": 1,
            "last_stored": stored,
        }
        if new_object:  # an object already there refuses this, and the caller goes again
            key, name = ark_keys(ark)
            new |= {"ark": ark, "ark_key": key, "ark_name": name}
            new |= {"created": stored, "modified": stored}
            obj_id, created = sql.insert_one(InventoryObject, new), True
        else:
            obj, created = InventoryObject.objects.get_or_create(ark=ark, defaults=new)
            obj_id = obj.pk
        # Counted once here, so that no page counts a version's files by their change.
        counts = Counter(f.get("change") or "" for f in files)
        row_id = sql.insert_one(
            InventoryVersion,
            {
                "obj_id": obj_id,
                "number": version,
                "job_id": job_id,
                "stored": stored,
                "total_size": sum(f["size"] for f in files),
                "file_count": len(files),
                "mode": mode,
                "deleted": deleted,
                "added_count": counts["added"],
                "replaced_count": counts["replaced"],
                "carried_count": counts["carried"],
            },
        )
        if not created:
            for name, value in described.items():
                if value:
                    setattr(obj, name, value)
            obj.version_count = obj.versions.count()
            obj.last_stored = max(filter(None, (obj.last_stored, stored)))
            obj.save()
        sql.insert(
            InventoryFile,
            [
                {
                    "version_id": row_id,
                    "name": f["name"],
                    "size": f["size"],
                    "md5": f.get("md5") or "",
                    "sha256": f.get("sha256") or "",
                    "mime_type": f.get("mime_type") or "",
                    "change": f.get("change") or "",
                }
                for f in files
            ],
        )

    def current_version(self, ark: str) -> tuple[int, list[StoredFile]] | None:
        """The latest version of ``ark`` recorded here and its files, None for a new object:
        what a new version is compared with before it is stored (``pipeline.review``)."""
        row = InventoryVersion.objects.filter(obj__ark=ark).order_by("-number").first()
        if row is None:
            return None
        files = [
            StoredFile(name, size, {k: v for k, v in (("md5", md5), ("sha256", sha)) if v})
            for name, size, md5, sha in row.files.values_list("name", "size", "md5", "sha256")
        ]
        return row.number, files

    def version_of_job(self, ark: str, job_id: str) -> int | None:
        """The version of ``ark`` that ``job_id`` recorded, None when it recorded none."""
        rows = InventoryVersion.objects.filter(obj__ark=ark, job_id=job_id)
        return rows.values_list("number", flat=True).first()

    def versions_by_other_jobs(self, ark: str, job_id: str) -> set[int]:
        rows = InventoryVersion.objects.filter(obj__ark=ark).exclude(job_id=job_id)
        return set(rows.values_list("number", flat=True))

    def ark_for_local_id(self, collection: str, local_id: str) -> str | None:
        row = LocalIdentifier.objects.filter(collection=collection, local_id=local_id).first()
        return row.ark if row else None

    def bind_local_id(self, collection: str, local_id: str, ark: str) -> str:
        """Bind ``local_id`` to ``ark`` unless already bound; the ARK it is bound to."""
        try:
            with transaction.atomic():
                row, _ = LocalIdentifier.objects.get_or_create(
                    collection=collection, local_id=local_id, defaults={"ark": ark}
                )
        except IntegrityError:  # bound concurrently: the first binding stands
            row = LocalIdentifier.objects.get(collection=collection, local_id=local_id)
        return row.ark


def _recorded_by(ark: str, version: int, job_id: str) -> bool:
    """Whether ``job_id`` recorded this version already; InventoryError when another job did."""
    holder = (
        InventoryVersion.objects.filter(obj__ark=ark, number=version)
        .values_list("job_id", flat=True)
        .first()
    )
    if holder is not None and holder != job_id:
        raise InventoryError(
            f"inventory already holds {ark} version {version} from job {holder}",
            retryable=False,
        )
    return holder is not None
