"""From a batch submission to the jobs it becomes: one job per object.

Pure: the batch handler fetches and validates the manifest, this module
decides the jobs. Each job carries ``batch_row``, its position in the
submission, so creating the jobs of a batch again after a crash skips the rows
that already have one instead of creating duplicates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .itemkeys import JOB_ID_KEY, with_both_profile_keys
from .manifests import Manifest, ManifestRow

SINGLE_TYPES = ("file", "container", "object-manifest")
MANIFEST_KIND = {
    "object-manifest": "object",
    "single-file-batch-manifest": "files",
    "batch-manifest": "manifests",
    "container-batch-manifest": "containers",
}
KIND_TEXT = {
    "object": "one object",
    "files": "a batch of files",
    "manifests": "a batch of object manifests",
    "containers": "a batch of containers",
}
SUBMISSION_TYPES = ("file", "container", *MANIFEST_KIND)
# Each type as a person reads it (the submission form, the check page).
TYPE_WORDS = {
    "file": "One file",
    "container": "One container (zip or tar)",
    "object-manifest": "One object, by its manifest",
    "single-file-batch-manifest": "A batch of files",
    "batch-manifest": "A batch of objects, by their manifests",
    "container-batch-manifest": "A batch of containers",
}
KIND_TYPE = {kind: kind_type for kind_type, kind in MANIFEST_KIND.items()}
PAYLOAD_TYPE = {"files": "file", "manifests": "object-manifest", "containers": "container"}
# Submission keys copied into every job's configuration.
INHERITED = (
    "profile",
    "collection",
    "submitter",
    "submitted_by",
    "submission_mode",
    "response_type",
    "notification",
    "batchID",
    "created_by",  # sides.CREATED_BY_KEY: a job is ours when its batch is
    "store_record",  # stepowners.KEY: who stores and records it
)


@dataclass(frozen=True)
class JobSpec:
    row: int
    configuration: dict
    identifiers: dict | None
    metadata: dict | None


def manifest_kind_problem(submission_type: str, manifest: Manifest) -> str | None:
    expected = MANIFEST_KIND.get(submission_type)
    if expected and manifest.kind != expected:
        return (
            f"the submission type is {submission_type}, but the manifest's profile "
            f"{manifest.profile} is for {KIND_TEXT[manifest.kind]}"
        )
    return None


def type_to_pick(submission_type: str | None, kind: str) -> str | None:
    """What to say when a manifest of ``kind`` is not one ``submission_type`` takes (any type
    when None): the type that takes it, in words; None when the type fits or none does."""
    right = KIND_TYPE.get(kind)
    if right is None or submission_type == right:
        return None
    wrong = f"not “{TYPE_WORDS[submission_type]}”: " if submission_type in TYPE_WORDS else ""
    return f"this manifest is for {KIND_TEXT[kind]}, {wrong}pick the type “{TYPE_WORDS[right]}”"


def plan_jobs(submission: dict, manifest: Manifest | None = None) -> list[JobSpec]:
    """The jobs of a batch; batch manifests give one job per row."""
    kind: Any = submission.get("type")  # the submission's own JSON, checked by the caller
    if kind in SINGLE_TYPES:
        return [_single_job(submission)]
    if manifest is None:
        raise ValueError(f"a {kind} submission needs its manifest")
    payload_type = PAYLOAD_TYPE[MANIFEST_KIND[kind]]
    return [_row_job(submission, i, row, payload_type) for i, row in enumerate(manifest.rows)]


def inherited(submission: dict) -> dict:
    """The submission's ``INHERITED`` keys that have a value."""
    return {k: submission[k] for k in INHERITED if submission.get(k) not in (None, "")}


def _single_job(submission: dict) -> JobSpec:
    config = inherited(submission) | {
        "batch_row": 0,
        "payload_url": submission.get("payload_url"),
        "payload_type": submission.get("type"),
        "filename": submission.get("filename") or _last_segment(submission.get("payload_url", "")),
        "digest_type": submission.get("digest_type"),
        "digest_value": submission.get("digest_value"),
        "local_id": submission.get("local_id"),
        "title": submission.get("erc_what"),
    }
    return JobSpec(
        0,
        with_merritt_keys(_with_primary(_clean(config), submission.get("primary_id"))),
        _identifiers(submission.get("primary_id"), submission.get("local_id")),
        _metadata(
            submission.get("erc_who"),
            submission.get("erc_what"),
            submission.get("erc_when"),
            submission.get("erc_where"),
        ),
    )


def _row_job(submission: dict, i: int, row: ManifestRow, payload_type: str) -> JobSpec:
    config = inherited(submission) | {
        "batch_row": i,
        "manifest_line": row.line,
        "payload_url": row.url,
        "payload_type": payload_type,
        "filename": row.file_name,
        "digest_type": row.hash_algorithm,
        "digest_value": row.hash_value,
        "file_size": row.file_size,
        "local_id": row.local_id,
        "title": row.title or submission.get("erc_what"),
    }
    who = row.creator or submission.get("erc_who")
    what = row.title or submission.get("erc_what")
    when = row.date or submission.get("erc_when")
    return JobSpec(
        i,
        with_merritt_keys(_with_primary(_clean(config), row.primary_id)),
        _identifiers(row.primary_id, row.local_id),
        _metadata(who, what, when, submission.get("erc_where")),
    )


def _with_primary(config: dict, primary: str | None) -> dict:
    """The depositor's ARK, kept even when empty: Processing tells by it an ARK the
    depositor chose (checked against the ownership rule) from one this queue minted and
    saved in ``identifiers`` on an earlier run, and a job planned before this key existed
    (or by Merritt) from one with no ARK given."""
    return config | {"primary_id": primary or ""}


def with_merritt_keys(config: dict) -> dict:
    """MerrittZK's names beside ours: ``profile_name`` (its ``profileName()``) and
    ``jobID`` (its ``jid()``), left empty here for the store to fill with the jid it takes."""
    return with_both_profile_keys(config) | {JOB_ID_KEY: ""}


def _identifiers(primary: str | None, local: str | None) -> dict | None:
    if not primary and not local:
        return None
    return {"primary_id": primary or "", "local_id": [local] if local else []}


def _metadata(who, what, when, where) -> dict | None:
    meta = {"erc_who": who, "erc_what": what, "erc_when": when, "erc_where": where}
    return _clean(meta) or None


def _clean(d: dict) -> dict:
    return {k: v for k, v in d.items() if v not in (None, "")}


def _last_segment(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1] if url else ""


def batch_priority(profile_priority: int, job_count: int) -> int:
    """Big batches queue behind small ones (a higher number is served later)."""
    bump = 0 if job_count <= 10 else 1 if job_count <= 100 else 2 if job_count <= 1000 else 3
    return max(0, min(99, profile_priority + bump))
