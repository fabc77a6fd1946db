"""A manifest judged the way Merritt judges it, without submitting anything.

``check_manifest`` lists every error (what refuses the manifest here, exactly as a
submission would be refused) and every warning: what Merritt's own manifest validator
objects to although its ingest goes on. Values quoted back are cut to ``VALUE_LIMIT``
characters and URLs lose their credentials, so a report is safe to show and to return
from the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from .findings import Finding, Findings, capped
from .manifest import MAX_BYTES, Manifest, container_type, parse_findings
from .urltext import hide_credentials, redact, userinfo_of

VALUE_LIMIT = 200


@dataclass(frozen=True)
class ManifestReport:
    profile: str
    kind: str
    rows: int
    errors: tuple[Finding, ...]
    warnings: tuple[Finding, ...]

    @property
    def valid(self) -> bool:
        return not self.errors

    def as_json(self) -> dict:
        return {
            "valid": self.valid,
            "errors": [_item(f) for f in self.errors],
            "warnings": [_item(f) for f in self.warnings],
            "profile": self.profile,
            "rows": self.rows,
        }


def check_manifest(
    data: bytes | str, *, max_bytes: int = MAX_BYTES, max_batch_rows: int | None = None
) -> ManifestReport:
    """The manifest judged as a submission judges it; ``max_batch_rows``: the batch's own
    row limit, so that check and submission agree."""
    manifest, found = parse_findings(data, max_bytes=max_bytes, max_batch_rows=max_batch_rows)
    if manifest is not None:
        _warn_where_merritt_validator_is_stricter(manifest, found)
    return ManifestReport(
        profile=(safe_value(manifest.profile) or "") if manifest else "",
        kind=manifest.kind if manifest else "",
        rows=len(manifest.rows) if manifest else 0,
        errors=tuple(capped(found.errors)),
        warnings=tuple(capped(found.warnings)),
    )


def safe_value(value: str | None) -> str | None:
    """``value`` fit to show: credentials of every URL in it hidden (a value may be a whole
    line), at most VALUE_LIMIT characters."""
    if value is None:
        return None
    if "@" in value:
        value = hide_credentials(redact(value) if userinfo_of(value) else value)
    return value if len(value) <= VALUE_LIMIT else value[: VALUE_LIMIT - 1] + "…"


def _item(f: Finding) -> dict:
    return {"line": f.line, "field": f.field, "value": safe_value(f.value), "message": f.message}


def _warn_where_merritt_validator_is_stricter(manifest: Manifest, found: Findings) -> None:
    for row in manifest.rows:
        host = urlsplit(row.url).hostname or ""
        if host and "." not in host and ":" not in host:
            found.warn(
                f"host name {host!r} has no dot: Merritt's validator refuses it, its ingest "
                "fetches it",
                row.line,
                "nfo:fileUrl",
                row.url,
            )
        if manifest.kind == "containers" and container_type(row.file_name) is None:
            found.warn(
                "container file name without an archive extension (.zip, .tar, .tar.gz, .tgz): "
                "Merritt's validator refuses it, its ingest recognises the archive by content",
                row.line,
                "nfo:fileName",
                row.file_name,
            )
        if manifest.kind == "files" and row.file_name.lower().endswith(".checkm"):
            found.warn(
                "a .checkm file in a batch of files is ingested as a file, not read as a "
                "manifest (a batch of manifests uses mrt-batch-manifest); Merritt's validator "
                "refuses it",
                row.line,
                "nfo:fileName",
                row.file_name,
            )
