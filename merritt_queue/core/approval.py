"""Approval before a batch starts: the marker a batch awaiting a person's approval carries.

A profile may ask that its new batches wait for an operator (``Profile.approval_required``).
Such a batch is created Held, with ``states`` (so MerrittZK's ``acquirePendingBatch`` never
takes it, and with no ``batch-processing`` its reporting passes it by) and with a child node
``approval`` holding what was known at arrival: its profile, when approval was asked for and
the pre-flight summary. MerrittZK loads a batch by its status and submission only
(``Batch.loadProperties``), so the extra child is never read by Merritt; its cleanup deletes a
batch recursively, the child with it.

Held is one of MerrittZK's ``BatchState`` values: a new status word would make its ``load``
throw. What tells an awaiting batch from one a person or a collection hold held is the
``approval`` node, never the status message, which a person's note may replace.

Approving moves it Held -> Pending, rejecting Held -> Deleted (a deleted batch is what
Merritt's cleanup removes, and Held -> Failed is no move of MerrittZK's), each in the multi
that deletes the node (``store.approvals``). Their messages start with ``APPROVED`` or
``REJECTED``, which the depositor's notifications look for.
"""

from __future__ import annotations

from typing import Any

from . import summaryfit
from . import tree as t
from .states import BatchStatus

APPROVAL = "approval"
# How an awaiting batch is shown and judged by the admin actions: its own state to a person,
# Held to ZooKeeper.
AWAITING = "Awaiting approval"
AWAITING_MESSAGE = "awaiting approval: profile {profile} asks an operator to approve each batch"
APPROVED = "approved"
REJECTED = "rejected"

# ZooKeeper refuses a node past about 1 MB; a summary is kept well under it.
MAX_SUMMARY_BYTES = 32 * 1024


def shown_status(status: str, approval: object) -> str:
    """The state a person sees: ``AWAITING`` for a Held batch with its approval node."""
    return AWAITING if status == BatchStatus.HELD and approval is not None else status


def path(bid: str) -> str:
    return t.batch_node(bid, APPROVAL)


def node(profile: str, summary: dict[str, Any]) -> dict[str, Any]:
    """The ``approval`` node's JSON; a summary too big to keep is shrunk (``summaryfit``),
    and replaced by why only when even that is too big."""
    fitted = summaryfit.fit(summary, MAX_SUMMARY_BYTES)
    if fitted is None:
        fitted = {"unavailable": f"the summary is larger than {MAX_SUMMARY_BYTES} bytes"}
    summary = fitted
    return {
        "profile": profile,
        "requested_at": t.now(),
        "summary": summary,
        "created_by": "merritt-queue",
    }


def is_decision(from_status: str, to_status: str, message: str) -> bool:
    """Whether a batch's status entry is an approval decision (the depositor is told of it)."""
    if from_status != BatchStatus.HELD:
        return False
    if to_status == BatchStatus.PENDING:
        return message.startswith(f"{APPROVED} by ")
    return to_status == BatchStatus.DELETED and message.startswith(f"{REJECTED} by ")
