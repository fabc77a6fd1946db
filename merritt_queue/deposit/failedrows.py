"""A batch's failed jobs written back as the checkm manifest the batch came in: its profile,
prefixes and fields, one row per failed job, each after a comment naming the job and why it
failed. A librarian corrects the rows and uploads them (``deposit.rowmatch``).

Guarantees: the text parses with our own reader (``deposit.manifest``) whenever the jobs'
values passed the door when the batch was submitted; a comment is one line, and no value
written can add a line or a cell (line breaks, control characters and ``|`` are replaced).
A value the job does not keep (a row's last-modified date, its MIME type) is left empty.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from ..core import jobparams
from ..core.planning import MANIFEST_KIND
from ..core.states import resume_target
from .manifest import _CANONICAL, PROFILES, STANDARD_FIELDS

PROFILE_BASE = "http://uc3.cdlib.org/registry/ingest/manifest/"
# The prefixes Merritt's sample batch manifests declare.
STANDARD_PREFIXES = (
    "#%prefix | mrt: | http://merritt.cdlib.org/terms#",
    "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#",
)
MESSAGE_LIMIT = 500
# A comment that names a job: what the upload matches a row by.
JID_COMMENT = re.compile(r"^#\s*(jid\d{10})\b")
_BREAKS = re.compile(r"[\r\n\u2028\u2029\x85]+")


@dataclass(frozen=True)
class Header:
    """The manifest's lines before its rows, and the fields its rows fill."""

    lines: tuple[str, ...]
    fields: tuple[str, ...]


@dataclass(frozen=True)
class FailedJob:
    jid: str
    last_successful: str | None
    message: str
    configuration: dict | None
    identifiers: dict | None
    metadata: dict | None


def standard_header(submission_type: str) -> Header:
    """What a batch of ``submission_type`` declares when its own manifest is not at hand."""
    kind = MANIFEST_KIND[submission_type]
    profile = next(name for name, k in PROFILES.items() if k == kind)
    fields = STANDARD_FIELDS[kind]
    lines = (
        "#%checkm_0.7",
        f"#%profile | {PROFILE_BASE}{profile}",
        *STANDARD_PREFIXES,
        "#%fields | " + " | ".join(fields),
    )
    return Header(lines, fields)


def header_of(text: str, submission_type: str) -> Header:
    """The header lines of the batch's own manifest ``text`` as it had them, or the
    standard ones when it has no ``#%profile`` of the batch's kind or no ``#%fields``."""
    lines: list[str] = []
    fields: tuple[str, ...] = ()
    kind = ""
    for raw in _BREAKS.split(text.removeprefix("\ufeff")):
        line = raw.strip()
        if not line:
            continue
        if not line.startswith("#"):
            break  # the first row
        if not line.startswith("#%") or line.lower().startswith("#%eof"):
            continue
        cells = [c.strip() for c in line.split("|")]
        keyword = cells[0].lower()
        if keyword == "#%profile" and len(cells) > 1:
            kind = PROFILES.get(cells[1].rstrip("/").rsplit("/", 1)[-1].lower(), "")
        elif keyword == "#%fields":
            fields = tuple(_CANONICAL.get(c.lower(), c) for c in cells[1:])
        lines.append(clean(line, MESSAGE_LIMIT * 8, keep_bars=True))
    if kind != MANIFEST_KIND.get(submission_type) or "nfo:fileUrl" not in fields:
        return standard_header(submission_type)
    return Header(tuple(lines), fields)


def clean(
    text: str, limit: int = MESSAGE_LIMIT, *, keep_bars: bool = False, keep_spaces: bool = False
) -> str:
    """``text`` as one line of printable characters, at most ``limit`` long, with ``|``
    shown as ``/`` (a cell separator) unless ``keep_bars``; runs of spaces are one unless
    ``keep_spaces`` (a cell's value: a corrected file must not differ where nobody typed)."""
    text = _BREAKS.sub(" ", text or "")
    text = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in text)
    if not keep_bars:
        text = text.replace("|", "/")
    text = text.strip() if keep_spaces else " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failed_at(job: FailedJob) -> str:
    """The step the job failed in: the one after its last successful step."""
    return resume_target(job.last_successful)


def comment(job: FailedJob) -> str:
    return clean(f"# {job.jid} failed at {failed_at(job)}: {job.message or '(no message)'}")


def row_values(job: FailedJob) -> dict[str, str]:
    """Each checkm field as the job holds it."""
    config = job.configuration or {}
    now = jobparams.current(job.configuration, job.identifiers, job.metadata)
    primary = config.get("primary_id")
    return {
        "nfo:fileUrl": now["payload_url"],
        "nfo:hashAlgorithm": now["digest_type"],
        "nfo:hashValue": now["digest_value"],
        "nfo:fileSize": now["file_size"],
        "nfo:fileName": now["filename"],
        # The depositor's ARK, never one this queue minted on an earlier try.
        "mrt:primaryIdentifier": primary if isinstance(primary, str) else "",
        "mrt:localIdentifier": now["local_id"],
        "mrt:creator": now["erc_who"],
        "mrt:title": now["erc_what"],
        "mrt:date": now["erc_when"],
    }


def written(value: str) -> str:
    """A cell's value as the file holds it."""
    return clean(value, 10_000, keep_spaces=True)


def row(job: FailedJob, fields: tuple[str, ...]) -> str:
    values = row_values(job)
    return " | ".join(written(values.get(name, "")) for name in fields)


def write(header: Header, jobs: list[FailedJob]) -> str:
    """The manifest of ``jobs``: the header, then a comment and a row for each job."""
    lines = list(header.lines)
    for job in jobs:
        lines += [comment(job), row(job, header.fields)]
    lines.append("#%eof")
    return "\n".join(lines) + "\n"
