"""Re-running Completed work as a new version of the same objects.

A re-run is a new batch, with a fresh bid and its own batchID, never the old batch moved
back: Completed stays final (docs/zk-tree.md), and ``/batch-uuids`` keeps naming one batch
per batchID, as MerrittZK reads it. Two kinds:

- An administrator's re-run of Completed jobs (``job.rerun``, ``batch.rerun``): a batch of
  type ``rerun`` naming the old batch and, for a job re-run, the jobs. Its batch handler
  plans one job per Completed job from the job's own nodes (``plan_rerun``), with the
  object's ARK as the depositor's ``primary_id``: the object gets its next version, or, when
  the bytes are the same, "unchanged: no new version".
- A depositor's resubmission of a Completed or Failed batch's batchID with ``rerun`` asked
  for: their new submission (a failed run's corrected manifest, say), under the batchID
  ``<batchID>~rerun-<n>``.

Pure: the store creates the batch (``store.new_batches.create_rerun_batch``).
"""

from __future__ import annotations

from .planning import JobSpec, inherited, with_merritt_keys

RERUN_TYPE = "rerun"
# Between a batchID and its re-run's number; a depositor's batchID cannot hold it.
MARK = "~rerun-"
# Keys of the old job's configuration that belong to its own run, not to the object.
RUN_KEYS = ("batch_row", "manifest_line", "rerun_of")


def rerun_uuid(base: str, n: int) -> str:
    """The batchID of the ``n``-th re-run of ``base`` (a batchID, or a bid without one)."""
    return f"{base_of(base)}{MARK}{n}"


def base_of(uuid: str) -> str:
    """The batchID a re-run's batchID was made from (itself for any other)."""
    return uuid.split(MARK, 1)[0]


def rerun_submission(old: dict, bid: str, jids: list[str], by: str, when: str) -> dict:
    """The submission of a re-run of batch ``bid`` (``old`` its submission): its Completed
    jobs, or only ``jids``. Profile, submitter and notification stay the old batch's; who
    asked is ``submitted_by``."""
    keep = inherited(old)
    keep.pop("batchID", None)
    return keep | {
        "type": RERUN_TYPE,
        "rerun_of": bid,
        "rerun_jobs": list(jids),
        "submitted_by": by,
        "submitted": when,
        "erc_what": f"re-run of {', '.join(jids) if jids else 'batch ' + bid}",
    }


def rerun_refusal(configuration: dict | None) -> str | None:
    """Why a Completed job cannot be run again from its own nodes, or None."""
    url = (configuration or {}).get("payload_url")
    if not isinstance(url, str) or not url:
        return "it names no payload URL"
    if url.startswith("file:"):
        return (
            "its payload was uploaded, and an upload is removed once its batch completes; "
            "submit the file again instead"
        )
    return None


def plan_rerun(submission: dict, jobs: list) -> list[JobSpec]:
    """One job per old job (records with jid, configuration, identifiers, metadata): its
    payload, digest and metadata as they were, its ARK given, and the new batch's keys."""
    base = inherited(submission)
    specs = []
    for row, job in enumerate(jobs):
        config = {k: v for k, v in (job.configuration or {}).items() if k not in RUN_KEYS}
        ids = job.identifiers or {}
        config |= base | {
            "batch_row": row,
            "rerun_of": job.jid,
            "primary_id": ids.get("primary_id") or "",
        }
        specs.append(JobSpec(row, with_merritt_keys(config), job.identifiers, job.metadata))
    return specs
