"""Signed URLs at which Merritt storage fetches one job's add-manifest and files.

A ``merritt-queue`` job's content reaches Merritt storage over HTTP from this project's web
tier (``MQ_CONTENT_BASE_URL``), never as ``file://``. Each URL names one job and one file
of its working folder and carries a signature over both and the time it was made
(``TimestampSigner`` keyed by ``SECRET_KEY`` with this module's salt): nobody without the
key can make one, one job's signature does not open another job's file or another file,
and it lapses after ``MQ_CONTENT_URL_MAX_AGE`` seconds. A job that is recorded (or gone)
serves nothing, whatever the signature: its files are for storage, which is done with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from django.conf import settings
from django.core import signing

from merritt_queue.core.states import JobStatus
from merritt_queue.deposit.safepath import UnsafePath, inside

SALT = "merritt-queue.merritt-content"
# The add-manifest Processing writes in the job's folder, beside (never inside) its object.
MANIFEST_NAME = "merritt-add-manifest.checkm"
URL_PREFIX = "merritt-content"
# Storage is done with a job once Recording starts, but a failed Storing may be resumed.
_SERVING = {JobStatus.PROCESSING, JobStatus.STORING, JobStatus.RECORDING}
_RECORDED = {JobStatus.RECORDING, JobStatus.NOTIFY, JobStatus.COMPLETED}


def _signer() -> signing.TimestampSigner:
    return signing.TimestampSigner(salt=SALT)


def signed_url(jid: str, name: str, base: str | None = None) -> str:
    """The URL storage fetches ``name`` (relative to the job's folder) of job ``jid`` at."""
    value = f"{jid}/{name}"
    signature = _signer().sign(value)[len(value) + 1 :]
    root = (base if base is not None else settings.MQ_CONTENT_BASE_URL).rstrip("/")
    return f"{root}/{URL_PREFIX}/{jid}/{quote(name)}?s={signature}"


def verified(jid: str, name: str, signature: str) -> bool:
    """Whether ``signature`` was made here for exactly this job and name, and is not too old."""
    if not signature:
        return False
    try:
        _signer().unsign(f"{jid}/{name}:{signature}", max_age=settings.MQ_CONTENT_URL_MAX_AGE)
    except signing.BadSignature:  # SignatureExpired is one
        return False
    return True


def servable(status: Mapping[str, Any] | None) -> bool:
    """Whether a job in this status record still serves its content to storage."""
    if not status:
        return False
    if status.get("status") in _SERVING:
        return True
    return status.get("status") == JobStatus.FAILED and (
        status.get("last_successful_status") not in _RECORDED
    )


def content_file(job_dir: Path, name: str) -> Path | None:
    """The file ``name`` of the job's folder, None when absent or outside it."""
    try:
        path = inside(job_dir, name)
    except (UnsafePath, ValueError):
        return None
    return path if path.is_file() else None


def unsigned(url: str) -> str:
    """A content URL without its signature, to show on a page."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
