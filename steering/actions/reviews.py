"""Approving or rejecting a destructive update that waits Held after Processing
(``merritt_queue.core.review``): approved, it goes straight on to Storing; rejected, it fails
with the reason and its object is not touched. The person and the reason are kept in the
job's ``store`` node with the decision, in its message and history, and in the audit trail.
"""

from __future__ import annotations

from inventory.recorder import LocalInventory
from merritt_queue.core import review
from merritt_queue.core.errors import InvalidTransition
from merritt_queue.core.store import QueueStore
from pipeline import review as reviewing
from steering.actions.results import Applied

APPROVE, REJECT = "job.approve_update", "job.reject_update"
ACTIONS = (APPROVE, REJECT)
NOT_AWAITING = "it is Held, but not awaiting approval of a destructive update"


def approve_update(store: QueueStore, job, params, note: str) -> Applied:
    ark = (job.identifiers or {}).get("primary_id")
    if why := (ark and reviewing.changed(job, _current_version(ark))) or reviewing.lapsed(job):
        raise InvalidTransition(f"job {job.jid}: not approved: {why}")
    by, _, reason = note.partition(": ")
    return Applied(review.approve(store, job, by, reason), "approved: it goes on to Storing")


def reject_update(store: QueueStore, job, params, note: str) -> Applied:
    by, _, reason = note.partition(": ")
    return Applied(review.reject(store, job, by, reason), "rejected: the job failed")


def _current_version(ark: str) -> int | None:
    """The object's version the local inventory recorded last, None when it knows none
    (in ``merritt-queue`` mode Merritt's storage never asks ours, so this is the only
    check before it stores)."""
    current = LocalInventory().current_version(ark)
    return current[0] if current else None
