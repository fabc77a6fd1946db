"""An upload kept for the retry of a submission form shown again.

A browser never sends a chosen file again by itself, so when the form comes back (a refusal,
a batchID already taken) the file it sent is kept here, for this session only, to be
submitted by the next try without being chosen again. Guarantees:

- One file a session, under ``<MQ_WORK_DIR>/kept-uploads/<token>/<name>``: the token is random
  and held in the session alone, never in the page; the name is the submission's own safe
  file name. A request can name no other folder, and no other session's file.
- A kept file is used once: taken by the next try that asks for it, it is removed, whatever
  that try's answer (which keeps the file again if the form comes back again).
- Nothing is kept longer than ``KEEP_SECONDS``: each keep removes the folders older than that.
"""

from __future__ import annotations

import re
import secrets
import shutil
import time
from pathlib import Path

from django.conf import settings

from door.submission import safe_upload_name
from pipeline.submitted import Upload

SESSION_KEY = "mq_kept_upload"
KEEP_SECONDS = 24 * 3600
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{20,64}$")


def kept_root() -> Path:
    return Path(settings.MQ_WORK_DIR) / "kept-uploads"


def keep(session, upload: Upload) -> str:
    """Keep ``upload`` (at its start) for this session's next try, in place of any earlier
    one; the name the page shows."""
    forget(session)
    _remove_old()
    token = secrets.token_urlsafe(24)
    name = safe_upload_name(upload.name)
    target = kept_root() / token / name
    target.parent.mkdir(parents=True)
    upload.file.seek(0)
    with target.open("wb") as out:
        shutil.copyfileobj(upload.file, out, 1 << 20)
    session[SESSION_KEY] = {"token": token, "name": name}
    return name


def kept_name(session) -> str | None:
    """The name of the file kept for this session, None when there is none."""
    path = _path(session)
    return path.name if path else None


def take(session) -> Upload | None:
    """The file kept for this session, open, for this try; removed from the keep (the caller
    closes it; the open file stays readable)."""
    path = _path(session)
    if path is None:
        return None
    upload = Upload(path.name, path.open("rb"), path.stat().st_size)
    forget(session)
    return upload


def forget(session) -> None:
    """Remove this session's kept file, if any."""
    path = _path(session)
    session.pop(SESSION_KEY, None)
    if path is not None:
        shutil.rmtree(path.parent, ignore_errors=True)


def _path(session) -> Path | None:
    kept = session.get(SESSION_KEY)
    if not isinstance(kept, dict) or not _TOKEN_RE.match(str(kept.get("token", ""))):
        return None
    path = kept_root() / kept["token"] / safe_upload_name(str(kept.get("name", "")))
    return path if path.is_file() else None


def _remove_old() -> None:
    root = kept_root()
    if not root.is_dir():
        return
    oldest = time.time() - KEEP_SECONDS
    for folder in root.iterdir():
        if folder.is_dir() and not folder.is_symlink() and folder.stat().st_mtime < oldest:
            shutil.rmtree(folder, ignore_errors=True)
