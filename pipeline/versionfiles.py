"""What Storing stored, kept beside the job for Recording: every file of the new version.

An update's version holds files the job never had (carried from the previous version), so
Recording cannot describe the version from the job's own files. Storing writes the stored
version here; Recording reads it back, or asks storage again when the file is gone (a step
re-run on another host, a directory cleaned by hand).
"""

from __future__ import annotations

import dataclasses
import json
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from merritt_queue.services.versions import StoredVersion, diff

UNCHANGED = "unchanged: no new version"
STORED = "stored-version.json"


@dataclass(frozen=True)
class RecordedVersion:
    version: int
    files: list[dict]
    deleted: list[str]
    mode: str


def save(work: Path, version: StoredVersion, entries: list[dict], mode: str) -> None:
    """``entries``: the job's own files as Processing described them, whose md5 and mime type
    fill in what storage did not report."""
    recorded = _recorded(version, mode, {e["name"]: e for e in entries})
    # Not dataclasses.asdict, which deep-copies every file's dict only for json to read it.
    data = {f.name: getattr(recorded, f.name) for f in dataclasses.fields(recorded)}
    (work / STORED).write_text(json.dumps(data), encoding="utf-8")


def load(work: Path, storage, ark: str, version: int) -> RecordedVersion:
    try:
        data = json.loads((work / STORED).read_text(encoding="utf-8"))
        if data.get("version") == version:
            return RecordedVersion(version, data["files"], data["deleted"], data.get("mode", ""))
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    return from_storage(storage, storage.get_version(ark, version), [], "")


def from_storage(storage, stored: StoredVersion, entries: list[dict], mode: str) -> RecordedVersion:
    """``stored`` as storage reported it, what it changed read from the version before it
    when storage did not say; ``entries`` as in ``save``."""
    if not stored.changes:
        number = stored.version
        before = storage.get_version(stored.ark, number - 1).files if number > 1 else None
        stored = dataclasses.replace(stored, changes=diff(before, stored.files))
    return _recorded(stored, mode, {e["name"]: e for e in entries})


def _recorded(version: StoredVersion, mode: str, described: dict[str, dict]) -> RecordedVersion:
    changes = {c.name: c.change for c in version.changes}
    files = []
    for f in version.files:
        own = described.get(f.name, {})
        files.append(
            {
                "name": f.name,
                "size": f.size,
                "md5": f.digests.get("md5") or own.get("md5", ""),
                "sha256": f.digests.get("sha256") or own.get("sha256", ""),
                "mime_type": own.get("mime_type") or _mime(f.name),
                "change": changes.get(f.name, ""),
            }
        )
    deleted = [c.name for c in version.changes if c.change == "deleted"]
    return RecordedVersion(version.version, files, deleted, mode)


def summary(version: StoredVersion) -> str:
    """``1 added, 4 carried``: what a version changed, in words, zero counts left out."""
    counts = version.counts()
    words = [f"{n} {change}" for change, n in counts.items() if n]
    return ", ".join(words) or "no files"


def _mime(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"
