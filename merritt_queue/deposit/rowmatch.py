"""A corrected failed-rows manifest (``deposit.failedrows``) matched to the batch's jobs.

A row is matched by the ``# jidNNNNNNNNNN`` comment right above it (no other row between):
that is what the download wrote, and it survives a corrected local id or file name. A row
without one is matched by its local id, when exactly one failed job of the batch has it.
A row matches a Failed job of this batch or is refused, saying why; it never becomes a new
job. Pure: the caller has parsed the manifest (the door's own checks) and read the jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import jobparams
from ..core.manifests import Manifest, ManifestRow
from ..core.records import JobRecord
from .checkmscan import LINE_BREAK
from .failedrows import JID_COMMENT, written

# ManifestRow attribute -> the job parameter it corrects
ROW_PARAMS = {
    "url": "payload_url",
    "hash_algorithm": "digest_type",
    "hash_value": "digest_value",
    "file_size": "file_size",
    "file_name": "filename",
    "local_id": "local_id",
    "title": "erc_what",
    "creator": "erc_who",
    "date": "erc_when",
}
# checkm field of each attribute: a column the manifest leaves out changes nothing.
COLUMN = {
    "url": "nfo:fileUrl",
    "hash_algorithm": "nfo:hashAlgorithm",
    "hash_value": "nfo:hashValue",
    "file_size": "nfo:fileSize",
    "file_name": "nfo:fileName",
    "local_id": "mrt:localIdentifier",
    "title": "mrt:title",
    "creator": "mrt:creator",
    "date": "mrt:date",
}


@dataclass(frozen=True)
class Matched:
    """A row and the failed job it corrects: the job's parameters as the row gives them."""

    line: int
    job: JobRecord
    after: dict[str, str]


@dataclass(frozen=True)
class RowRefused:
    line: int
    jid: str
    why: str


def row_jids(text: str) -> dict[int, str]:
    """Each row's line -> the jid of the comment right above it (rows without one left out);
    lines are numbered as the manifest reader numbers them."""
    found: dict[int, str] = {}
    current = ""
    for n, raw in enumerate(LINE_BREAK.split(text.removeprefix("\ufeff")), 1):
        line = raw.strip()
        if not line or line.startswith("#%"):
            continue
        if line.startswith("#"):
            hit = JID_COMMENT.match(line)
            current = hit[1] if hit else current
            continue
        if current:
            found[n] = current
        current = ""
    return found


def after_of(row: ManifestRow, fields: tuple[str, ...], before: dict[str, str]) -> dict[str, str]:
    """The job's parameters as ``row`` gives them; a column not in ``fields`` keeps ``before``."""
    after = dict(before)
    for attr, name in ROW_PARAMS.items():
        if COLUMN[attr] in fields:
            value = getattr(row, attr)
            given = "" if value is None else str(value)
            # The value as the download wrote it (a ``|`` can only be sent as ``/``): the row
            # left it as it was.
            if given != written(before.get(name, "")):
                after[name] = given
    return after


def match(
    manifest: Manifest,
    text: str,
    bid: str,
    failed: list[JobRecord],
    others: dict[str, str],
) -> tuple[list[Matched], list[RowRefused]]:
    """Each row of ``manifest`` (read from ``text``) matched to one of ``failed``, the batch's
    Failed jobs, or refused; ``others``: the batch's other jobs, jid -> status."""
    by_jid = {job.jid: job for job in failed}
    by_local: dict[str, list[JobRecord]] = {}
    for job in failed:
        local = jobparams.current(job.configuration, job.identifiers, job.metadata)["local_id"]
        if local:
            by_local.setdefault(local, []).append(job)
    jids = row_jids(text)
    matched: list[Matched] = []
    refused: list[RowRefused] = []
    taken: dict[str, int] = {}
    for row in manifest.rows:
        jid = jids.get(row.line, "")
        found, why = _job_of(row, jid, bid, by_jid, by_local, others)
        if found is None:
            refused.append(RowRefused(row.line, jid, why))
            continue
        job = found
        if job.jid in taken:
            why = f"job {job.jid} is corrected by line {taken[job.jid]} already"
            refused.append(RowRefused(row.line, job.jid, why))
            continue
        taken[job.jid] = row.line
        config = job.configuration or {}
        primary = config.get("primary_id") or ""
        if "mrt:primaryIdentifier" in manifest.fields and (row.primary_id or "") != primary:
            why = (
                "the primary identifier (ARK) cannot be corrected here: it names the object; "
                "submit the object in a new batch instead"
            )
            refused.append(RowRefused(row.line, job.jid, why))
            continue
        before = jobparams.current(job.configuration, job.identifiers, job.metadata)
        matched.append(Matched(row.line, job, after_of(row, manifest.fields, before)))
    return matched, refused


def _job_of(row, jid, bid, by_jid, by_local, others) -> tuple[JobRecord | None, str]:
    if jid:
        if jid in by_jid:
            return by_jid[jid], ""
        if jid in others:
            return None, (f"job {jid} is {others[jid]}, not Failed: only failed jobs are corrected")
        return None, f"{jid} is not a job of batch {bid}: a correction never makes a new job"
    candidates = by_local.get(row.local_id or "", [])
    if len(candidates) == 1:
        return candidates[0], ""
    if candidates:
        return (
            None,
            f"{len(candidates)} failed jobs have local id {row.local_id!r}: keep the jid comment",
        )
    return None, (
        "no failed job of this batch matches this row (no '# jid...' comment above it, and "
        "no failed job has its local id): a correction never makes a new job"
    )
