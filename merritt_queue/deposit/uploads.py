"""The folders of uploaded payloads (``<MQ_WORK_DIR>/uploads/<uuid>/<name>``) and when they go.

An upload is what a batch's ``file:`` payload URL points at. It is kept while any job of its
batch could still read it (a Failed job resumed from Downloading copies it again), and
removed once its batch is Completed, or Deleted with no job left to resume; ``cleanup``
removes the rest: those of purged batches, and folders no batch in the tree refers to.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname


def uploads_root(work_dir: str | Path) -> Path:
    """Where uploads live: ``<MQ_WORK_DIR>/uploads``."""
    return Path(work_dir) / "uploads"


def upload_folder(uploads_root: Path, payload_url: object) -> Path | None:
    """The upload folder ``payload_url`` names, or None when it names no folder of ours.

    Only a folder directly under ``uploads_root`` qualifies, whatever the URL says: a tree
    written by another system must not make the queue remove anything else.
    """
    if not isinstance(payload_url, str) or not payload_url.startswith("file:"):
        return None
    root = Path(uploads_root).resolve()
    path = Path(url2pathname(urlsplit(payload_url).path)).resolve()
    if not path.is_relative_to(root):
        return None
    parts = path.relative_to(root).parts
    return root / parts[0] if len(parts) == 2 else None


def remove_upload(uploads_root: Path, payload_url: object) -> bool:
    """Remove the upload folder ``payload_url`` names; whether there was one to remove."""
    folder = upload_folder(uploads_root, payload_url)
    if folder is None or folder.is_symlink() or not folder.is_dir():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


def shown_payload(data: object) -> object:
    """A submission or a job's configuration fit to show anyone: an uploaded payload's
    ``file:`` URL, a path on this server, becomes the uploaded file's name."""
    if not isinstance(data, dict):
        return data
    url = data.get("payload_url")
    if not isinstance(url, str) or not url.startswith("file:"):
        return data
    name = data.get("filename") or Path(url2pathname(urlsplit(url).path)).name
    return data | {"payload_url": f"uploaded file {name}"}
