"""Submissions that name objects: local ids and ARKs, in single submissions and manifests
written into the test's content server (``tests.pipelinerun`` fixtures ``pipeline``, ``content``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from batches.models import Profile
from merritt_queue.services.storage import LocalStorage

# tests.pipelinerun's, not imported from it: a plugin module imported first is not rewritten.
FIXTURES = Path(__file__).parent / "fixtures" / "merritt-sample-files"

FILES_HEADER = (
    "#%checkm_0.7\n"
    "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest\n"
    "#%prefix | mrt: | http://merritt.cdlib.org/terms#\n"
    "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n"
    "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | "
    "nfo:fileLastModified | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier | "
    "mrt:creator | mrt:title | mrt:date\n"
)
OBJECT_HEADER = (
    "#%checkm_0.7\n"
    "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-ingest-manifest\n"
    "#%prefix | mrt: | http://merritt.cdlib.org/terms#\n"
    "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n"
    "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | "
    "nfo:fileLastModified | nfo:fileName\n"
)


def md5_of(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def files_manifest(content, name: str, rows: list[tuple[str, str, str]]) -> str:
    """A single-file-batch manifest of (fixture file, primary id, local id) rows; its URL."""
    lines = [
        f"{content.url}/{f} | md5 | {md5_of((FIXTURES / f).read_bytes())} |  |  | {f} | "
        f"{primary} | {local} |  | {f} | \n"
        for f, primary, local in rows
    ]
    (content.root / name).write_text(FILES_HEADER + "".join(lines) + "#%eof\n")
    return f"{content.url}/{name}"


def object_manifest(content, name: str, files: dict[str, bytes]) -> str:
    """An object manifest of ``files`` (name -> bytes), each served by ``content``; its URL."""
    lines = []
    for file_name, data in files.items():
        (content.root / file_name).write_bytes(data)
        lines.append(f"{content.url}/{file_name} | md5 | {md5_of(data)} |  |  | {file_name}\n")
    (content.root / name).write_text(OBJECT_HEADER + "".join(lines) + "#%eof\n")
    return f"{content.url}/{name}"


def versions(pipeline, ark: str) -> list[int]:
    return LocalStorage(pipeline.root / "storage").versions(ark)


def minted(pipeline) -> int:
    """How many ARKs the local minter has handed out on the test's shoulder."""
    counter = pipeline.root / "minter" / "99999-fk4.counter"
    return int(counter.read_text().strip()) if counter.exists() else 0


def other_profile() -> Profile:
    return Profile.objects.create(
        name="other",
        collection="other",
        minter_shoulder="ark:/99999/fk4",
        owner_ark="ark:/99999/fk4other",
    )


def only_job(pipeline, bid: str):
    (job,) = pipeline.jobs(bid)
    return job
