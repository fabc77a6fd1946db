"""What a submission lists, as the pre-flight reads it: a checkm manifest of any kind,
judged as its submission is, or a single file (anything that is not a manifest)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings

from merritt_queue.core.manifests import ManifestRow
from merritt_queue.deposit.manifest import parse_findings
from pipeline.capacity import batch_row_limit

# A checkm manifest says so in a header line; a depositor's own file (one file or one
# container) has none, and is one row of its own size.
_CHECKM_HEADER = re.compile(
    rb"^[ \t]*#%(?:checkm|profile|fields|eof)", re.IGNORECASE | re.MULTILINE
)
SINGLE = "file"


@dataclass(frozen=True)
class Listing:
    kind: str  # a manifest's kind (object, files, manifests, containers), SINGLE, or ""
    rows: tuple[ManifestRow, ...]  # the valid rows; none for a single file
    jobs: int
    problems: int  # the manifest check's errors
    single_size: int | None = None  # a single file's bytes


def read(data: bytes) -> Listing:
    if not _CHECKM_HEADER.search(data):
        return Listing(SINGLE, (), 1, 0, len(data))
    manifest, found = parse_findings(
        data, max_bytes=settings.MQ_MAX_MANIFEST_BYTES, max_batch_rows=batch_row_limit()
    )
    rows = manifest.rows if manifest else ()
    kind = manifest.kind if manifest else ""
    # An object manifest is one job of all its files; a batch manifest one job a row.
    jobs = (1 if rows else 0) if kind == "object" else len(rows) if kind else 0
    return Listing(kind, rows, jobs, len(found.errors))


def one_file(single: Mapping) -> Listing:
    """A single-file submission (``file``, ``container``) as the one row its job would be:
    ``url`` (none for an upload: nothing to ask), ``ark`` and ``local_id`` (the object it
    would update) and ``size`` (known for an upload only)."""
    row = ManifestRow(
        line=1,
        url=single.get("url") or "",
        hash_algorithm=None,
        hash_value=None,
        file_size=single.get("size"),
        last_modified=None,
        file_name="",
        mime_type=None,
        primary_id=single.get("ark") or None,
        local_id=single.get("local_id") or None,
        creator=None,
        title=None,
        date=None,
    )
    return Listing(SINGLE, (row,), 1, 0)
