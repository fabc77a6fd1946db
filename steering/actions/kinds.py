"""What an admin action is: its scope, the item it is judged on (``Target``), and its kinds,
one item at a time (``ItemAction``) or a job's status move pipelined over many
(``JobMove``). The actions themselves are ``steering.actions.catalog``'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from batches.models import mnemonic_problem
from merritt_queue.core.errors import QueueError
from merritt_queue.core.records import JobRecord
from merritt_queue.core.states import BatchStatus
from merritt_queue.core.store import QueueStore
from steering.actions.results import Applied, ItemResult, note_of
from steering.roles import Role

B = BatchStatus


class Scope(StrEnum):
    """What an action acts on; also the audit trail's ``scope`` column."""

    JOB = "job"
    BATCH = "batch"
    COLLECTION = "collection"
    QUEUE = "queue"
    WORKER = "worker"
    DEPENDENCY = "dependency"
    ACCESS = "access"  # a request of Merritt's access queue: ``small/qid0000000042``
    ACCESS_QUEUE = "access-queue"  # one of the two access queues: ``small`` or ``large``


@dataclass(frozen=True)
class Target:
    """An item as shown on the confirmation page, or as read again when acting on it."""

    id: str
    status: str = ""
    version: int | None = None
    collection: str = ""
    locked: bool = False
    # When the mirror found its nodes gone from the queue (``Job.removed_at``): history only.
    removed_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Action:
    """One verb. ``check`` is the judgement made on the confirmation page and made again on
    a fresh read when acting; ``apply`` acts on items that passed it."""

    name: str
    scope: Scope
    label: str
    role: Role  # the least role that may take it
    applies_to: frozenset[str] = frozenset()  # statuses; empty for collections and the queue
    warning: str = ""
    locked_ok: bool = False  # may act on an item a worker holds
    # Why the action does not apply to a status, where "it applies to X" would not help.
    refusals: dict = field(default_factory=dict, repr=False)
    # Whether execution hands it its items a chunk at a time (pipelined) or one by one.
    batched: bool = False
    # The page an item's button opens instead of the confirmation page (a URL name taking
    # the item's id): an action with a form of its own, taken on one item at a time.
    form: str = ""
    form_many: str = ""  # the form's page for a selection (a URL name taking no argument)

    def check(self, t: Target, collections: set[str] | None) -> str | None:
        """Why the action may not be taken on ``t`` by a person limited to ``collections``
        (None: all), or None."""
        if self.scope == Scope.WORKER and collections is not None:
            return "a worker runs the jobs of every collection; your role covers only some"
        if self.scope == Scope.DEPENDENCY and collections is not None:
            return "a dependency serves the jobs of every collection; your role covers only some"
        if self.scope == Scope.ACCESS_QUEUE and collections is not None:
            return "an access queue serves every collection's requests; your role covers only some"
        if self.scope == Scope.ACCESS and collections is not None and not t.collection:
            return (
                "its object belongs to no collection this queue knows; your role covers only "
                "some collections"
            )
        if self.scope == Scope.COLLECTION and (why := mnemonic_problem(t.id)):
            return why
        if t.removed_at is not None:
            return (
                f"removed from the queue by cleanup on {t.removed_at:%Y-%m-%d}; nothing to act on"
            )
        if self.applies_to and t.status in self.refusals:
            return f"it is {t.status}: {self.refusals[t.status]}"
        if self.applies_to and t.status not in self.applies_to:
            allowed = ", ".join(sorted(self.applies_to))
            return f"it is {t.status}; {self.label.lower()} applies to {allowed}"
        if t.locked and not self.locked_ok and self.scope == Scope.ACCESS:
            return "Merritt's access service is assembling it (locked)"
        if t.locked and not self.locked_ok:
            return "a worker is running a step on it (locked)"
        collection = t.id if self.scope == Scope.COLLECTION else t.collection
        if collections is not None and collection not in collections:
            return f"collection {collection or '(none)'} is outside your collections"
        return None

    def apply(self, store: QueueStore, items: Sequence, params: dict, note: str) -> list:
        """Act on ``items`` (records read, or ids); one ``ItemResult`` per item, in order."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class ItemAction(Action):
    """An action taken on one item at a time: ``run(store, item, params, note) -> Applied``."""

    run: Callable[[QueueStore, Any, dict, str], Applied] = field(repr=False)

    def apply(self, store: QueueStore, items: Sequence, params: dict, note: str) -> list:
        results: list[ItemResult] = []
        for item in items:
            try:
                results.append(self.run(store, item, params, note))
            except QueueError as e:
                results.append(e)
        return results


@dataclass(frozen=True, kw_only=True)
class JobMove(Action):
    """A job action that is one status move, so execution pipelines it: a chunk of jobs is
    moved in one round of multis, one job or thousands alike."""

    # ``move(store, job, params) -> (status, retry)``; ``after(job)`` once it is written.
    move: Callable[[QueueStore, JobRecord, dict], tuple[str, bool]] = field(repr=False)
    after: Callable[[JobRecord], None] | None = field(default=None, repr=False)
    what: str = ""  # the past tense the job's message gets: "resumed by <who>: <reason>"
    refused_in_deleted_batch: bool = False  # a move that would bring a job back to work
    scope: Scope = Scope.JOB
    batched: bool = True

    def apply(self, store: QueueStore, items: Sequence, params: dict, note: str) -> list:
        deleted = self._deleted_batches(store, items)
        results: list[ItemResult | None] = [None] * len(items)
        moves, where = [], []
        for i, job in enumerate(items):
            try:
                if job.bid in deleted:
                    raise QueueError(
                        f"job {job.jid} was not moved: its batch {job.bid} is Deleted. "
                        "Submit the object again in a new batch instead."
                    )
                target, retry = self.move(store, job, params)
            except QueueError as e:
                results[i] = e
                continue
            moves.append((job, target, note_of(note, self.what), retry))
            where.append(i)
        with store.changes.deferred():
            written = store.moves.move_jobs(moves)
        for i, result in zip(where, written, strict=True):
            if isinstance(result, QueueError):
                results[i] = result
                continue
            if self.after is not None:
                self.after(result)
            results[i] = Applied(result)
        return results

    def _deleted_batches(self, store: QueueStore, jobs: Sequence[JobRecord]) -> set[str]:
        """Of the jobs' batches, those that are Deleted, read in one pipelined round; only
        for a move that would bring a job back to work, which would recreate its batch's
        ``batch-processing``, and MerrittZK's reporting throws on a Deleted batch it finds
        there (issue 13)."""
        if not self.refused_in_deleted_batch:
            return set()
        bids = {job.bid for job in jobs if job.bid}
        if not bids:
            return set()
        statuses = store.batches.batch_statuses(bids)
        return {bid for bid, got in statuses.items() if got.get("status") == B.DELETED}
