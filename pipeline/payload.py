"""What a job's submission asks it to fetch: its files, their names, sizes and digests.

Estimating reads it to size the job, Downloading to fetch it; names are checked as they are
read from the tree (``safepath``), whoever wrote the job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from django.conf import settings

from merritt_queue.core.store import JobRecord
from merritt_queue.deposit.manifest import ManifestError, parse_manifest
from merritt_queue.deposit.safepath import safe_name
from pipeline.services import Services

OBJECT_MANIFEST = "object-manifest.checkm"
OBJECT_MANIFEST_URL = "object-manifest.url"
HEAD_SIZES = "head-sizes.json"


def job_config(job: JobRecord) -> dict:
    return job.configuration or {}


class PayloadFile:
    """One file a job downloads: where from, what it is called, what it must be."""

    def __init__(self, url: str, name: str, size=None, alg=None, value=None):
        # Checked as it is read from the tree: a refused name fails the job in Estimating,
        # before anything is fetched.
        self.url, self.name = url, safe_name(name)
        self.size = _checked_size(self.name, size)
        self.digest = (alg, value) if alg and value else None

    def identity(self) -> dict:
        return {"url": self.url, "size": self.size, "digest": list(self.digest or ())}


def _checked_size(name: str, size: object) -> int | None:
    """The declared size in bytes; it bounds a download and sizes the disk reservation."""
    if size is None:
        return None
    if isinstance(size, str) and size.isascii() and size.isdigit():
        return int(size)
    if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
        return size
    raise ManifestError(
        [f"the size given for {name}, {size!r}, is not a whole number of bytes (0 or more)"]
    )


def payload_files(s: Services, job: JobRecord) -> list[PayloadFile]:
    config = job_config(job)
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
    """The job's object manifest, fetched once into its working directory (again when the
    job's URL is no longer the one it was fetched from: an administrator edited it)."""
    url = job_config(job)["payload_url"]
    path = s.job_dir(job.jid) / OBJECT_MANIFEST
    source = path.with_name(OBJECT_MANIFEST_URL)
    if not path.exists() or _read_text(source) != url:
        path.parent.mkdir(parents=True, exist_ok=True)
        source.unlink(missing_ok=True)
        s.fetch(url, path, max_bytes=settings.MQ_MAX_MANIFEST_BYTES)
        source.write_text(url, encoding="utf-8")
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


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def known_sizes(files: list[PayloadFile], heads: Mapping[str, int | None]) -> list[int | None]:
    """Each file's size as Estimating knows it: the manifest's, else its HEAD's, else a local
    file's; None when nobody said."""
    return [f.size if f.size is not None else heads.get(f.url, local_size(f.url)) for f in files]


def local_size(url: str) -> int | None:
    if not url.startswith("file:"):
        return None
    path = Path(url2pathname(urlsplit(url).path))
    return path.stat().st_size if path.is_file() else None


def save_head_sizes(s: Services, job: JobRecord, heads: dict[str, int | None]) -> None:
    """Keep what the HEADs said: Downloading stops a file that grows past it."""
    path = s.job_dir(job.jid) / HEAD_SIZES
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({u: n for u, n in heads.items() if n is not None}))


def head_sizes(s: Services, job: JobRecord) -> dict[str, int]:
    try:
        sizes = json.loads((s.job_dir(job.jid) / HEAD_SIZES).read_text())
    except (OSError, ValueError):  # estimated on another host, or by an older version
        return {}
    return {u: n for u, n in sizes.items() if isinstance(n, int)} if isinstance(sizes, dict) else {}
