"""Recording stored versions in the local inventory tables.

Guarantees: recording the same (ARK, version) twice writes nothing the second
time (a Recording step re-run after a crash is harmless); a local id is bound
to one ARK forever, the first binding winning a race.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import IntegrityError, transaction

from merritt_queue.services.errors import InventoryError

from .models import InventoryFile, InventoryObject, InventoryVersion, LocalIdentifier


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
    ) -> bool:
        """Record one stored version; False when it was already recorded by the same job."""
        existing = InventoryVersion.objects.filter(obj__ark=ark, number=version).first()
        if existing:
            if existing.job_id != job_id:
                raise InventoryError(
                    f"inventory already holds {ark} version {version} from job {existing.job_id}",
                    retryable=False,
                )
            return False
        try:
            with transaction.atomic():
                self._insert(ark, version, job_id, collection, files, metadata or {})
        except IntegrityError:  # a twin step recorded it between our check and insert
            return False
        return True

    @staticmethod
    def _insert(ark, version, job_id, collection, files, metadata) -> None:
        obj, _ = InventoryObject.objects.get_or_create(ark=ark, defaults={"collection": collection})
        obj.title = metadata.get("erc_what") or obj.title
        obj.creator = metadata.get("erc_who") or obj.creator
        obj.date = metadata.get("erc_when") or obj.date
        obj.save()
        row = InventoryVersion.objects.create(
            obj=obj,
            number=version,
            job_id=job_id,
            stored=datetime.now(UTC),
            total_size=sum(f["size"] for f in files),
            file_count=len(files),
        )
        InventoryFile.objects.bulk_create(
            InventoryFile(
                version=row,
                name=f["name"],
                size=f["size"],
                md5=f.get("md5", ""),
                sha256=f.get("sha256", ""),
                mime_type=f.get("mime_type") or "",
            )
            for f in files
        )

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
