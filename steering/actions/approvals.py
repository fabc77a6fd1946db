"""Approving and rejecting a batch that awaits approval (``merritt_queue.core.approval``): what
the two actions do through the core. The confirmation page, the version shown, the reason, the
audit and the roles are every action's (``steering.actions.execution``); the messages written
start ``approved by`` / ``rejected by``, which is how the depositor's notifications know a
decision (``notifications.outbox.wanted``)."""

from __future__ import annotations

from merritt_queue.core import approval as ap
from merritt_queue.core.states import BatchStatus
from merritt_queue.core.store import QueueStore
from steering.actions.kinds import ItemAction, Scope
from steering.actions.results import Applied, note_of
from steering.roles import Role

NOT_AWAITING = (
    "it awaits no approval (its profile asked for none when it arrived, or it was decided "
    "already); release or delete it instead"
)


def approve(store: QueueStore, batch, params, note) -> Applied:
    return Applied(store.approvals.approve(batch, note_of(note, ap.APPROVED)))


def reject(store: QueueStore, batch, params, note) -> Applied:
    return Applied(store.approvals.reject(batch, note_of(note, ap.REJECTED)))


def action(name: str, label: str, run, warning: str) -> ItemAction:
    return ItemAction(
        name=name,
        scope=Scope.BATCH,
        label=label,
        role=Role.OPERATOR,
        applies_to=frozenset({ap.AWAITING}),
        refusals={BatchStatus.HELD: NOT_AWAITING},
        run=run,
        warning=warning,
    )


APPROVE = action(
    "batch.approve",
    "Approve",
    approve,
    "The batch starts as any batch does: Pending, then its jobs (a collection hold or a "
    "paused queue still applies). The depositor is told, with your reason.",
)
REJECT = action(
    "batch.reject",
    "Reject",
    reject,
    "The batch is deleted without running: this cannot be undone. The depositor is told, "
    "with your reason.",
)
