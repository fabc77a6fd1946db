"""A destructive update waits for a person between Processing and Storing.

Processing moves such a job to Held (a status every MerrittZK parses, and one no Merritt
consumer takes work from) with what the update would change under the ``review`` key of its
``store`` node: MerrittZK reads that node by key (``Job.storeManifestUrl``, ``storeMode``,
``storeDelete``), so a key more is never read by Merritt, and the diff stays with the job's
other facts in the multi that holds it. A job *awaits review* while it is Held with a
review that has no ``decision``.

Approving writes the decision into the same key and moves the job straight to Storing, in
one multi checked on the status version read: nothing Processing did is done again, and of
two people deciding at once one wins. Rejecting fails the job the same way, its object
untouched, and its last successful status set back to Downloading (``states``): resumed here
or requeued by Merritt's admin, it runs Processing again, which describes the update anew
and holds it again. No resume of a job whose update is not approved goes past Processing
(``latest_resume``): in ``merritt-queue`` mode Merritt's storage, which knows nothing of the
review, would store it. Our own Storing also stores no job whose review is not approved
(``stores``), a job moved there by hand included.
"""

from __future__ import annotations

from typing import Any

from . import tree as t
from .errors import ChangedUnderYou
from .records import JobRecord
from .states import JobStatus

KEY = "review"
APPROVED, REJECTED = "approved", "rejected"
# The start of a waiting job's message: the pages and the dispatcher's holds tell it by this.
WAITING = "awaiting approval of a destructive update"


def review_of(job: JobRecord) -> dict[str, Any] | None:
    got = (getattr(job, "store", None) or {}).get(KEY)
    return got if isinstance(got, dict) else None


def awaiting(job: JobRecord) -> bool:
    """Whether ``job`` waits for a person to approve or reject its update."""
    review = review_of(job)
    return job.status == JobStatus.HELD and review is not None and not review.get("decision")


def stores(job: JobRecord) -> str | None:
    """Why Storing may not store ``job`` (its review was not approved), or None."""
    review = review_of(job)
    if review is None or review.get("decision") == APPROVED:
        return None
    decided = review.get("decision")
    if decided == REJECTED:
        by = review.get("by") or "someone"
        return (
            f"its destructive update was rejected by {by}: {review.get('reason') or ''}; "
            "resume it from Processing to review it again"
        )
    return "its destructive update was never approved: resume it from Processing"


def latest_resume(job: JobRecord) -> str | None:
    """The latest step ``job`` may resume at because of its review (Processing while its
    update is not approved), or None when its review does not limit it."""
    got = review_of(job)
    if got is None or got.get("decision") == APPROVED:
        return None
    return JobStatus.PROCESSING


def approve(store, job: JobRecord, by: str, reason: str) -> JobRecord:
    """Release a job awaiting review straight to Storing, its decision kept in ``store``."""
    return _decide(store, job, APPROVED, JobStatus.STORING, by, reason)


def reject(store, job: JobRecord, by: str, reason: str) -> JobRecord:
    """Fail a job awaiting review with the reason; its object is not touched."""
    return _decide(store, job, REJECTED, JobStatus.FAILED, by, reason)


def _decide(store, job: JobRecord, decision: str, target: str, by: str, reason: str):
    if not awaiting(job):
        decided = (review_of(job) or {}).get("decision")
        raise ChangedUnderYou(
            f"job {job.jid} is {job.status} and awaits no review of a destructive update"
            + (f" (its update was {decided})" if decided else "")
        )
    decided = dict(review_of(job) or {}) | {
        "decision": decision,
        "by": by,
        "reason": reason,
        "at": t.now(),
    }
    new_store = dict(job.store or {}) | {KEY: decided}
    message = f"destructive update {decision} by {by}: {reason}"
    return store.moves.transition_job(job, target, message, data={"store": new_store})
