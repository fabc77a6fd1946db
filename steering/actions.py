"""Admin actions on jobs, batches, collections and the queue: planned, permitted, audited.

Guarantees:

- Permissions are enforced here, not only by hiding buttons: ``execute``
  refuses a person who may not take the action, items outside the person's
  collections, and everything when ``READ_ONLY`` is set.
- An item is acted on only at the znode version shown on the confirmation
  page; one that changed in between is skipped and reported, never acted on
  blindly (the core's multi re-checks that version atomically).
- Every execution is recorded (who, when, reason, each item's before and after
  status and versions, result). A confirmation token executes at most once, so
  a double submit does nothing twice.
- ZooKeeper first, through the queue core; the mirror follows by write-through.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from merritt_queue.errors import ChangedUnderYou, QueueError
from merritt_queue.runtime import get_store
from merritt_queue.states import JOB_STEPS, BatchStatus, JobStatus, resume_target
from merritt_queue.store import QueueStore

from .models import ADMINISTRATOR, OPERATOR, AdminAction, AdminActionItem

J, B = JobStatus, BatchStatus
RUNNING = frozenset({J.PENDING, *JOB_STEPS})


@dataclass(frozen=True)
class Action:
    name: str
    scope: str  # job | batch | collection | queue
    label: str
    role: str  # the least group that may take it
    applies_to: frozenset[str] = frozenset()  # statuses; empty for collections and the queue
    run: Callable = field(default=lambda store, item, params, note: None, repr=False)
    warning: str = ""
    locked_ok: bool = False  # may act on an item a worker holds


# --- what each action does through the core ----------------------------------------


def _note(user_note: str, what: str) -> str:
    return f"{what} by {user_note}"


def _job_resume(store: QueueStore, job, params, note):
    return store.resume_job(job, to=params.get("step") or None, message=_note(note, "resumed"))


def _job_delete(store: QueueStore, job, params, note):
    deleted = store.transition_job(job, J.DELETED, _note(note, "deleted"))
    shutil.rmtree(Path(settings.MQ_WORK_DIR) / "jobs" / job.jid, ignore_errors=True)
    return deleted


def _batch_delete(store: QueueStore, batch, params, note):
    """The batch and those of its jobs that can be deleted; the others are listed."""
    deleted = store.transition_batch(batch, B.DELETED, _note(note, "deleted"))
    kept = []
    for group in store.batch_jobs(batch.bid).values():
        for jid in group:
            job = store.get_job(jid)
            if job.status in (J.FAILED, J.HELD):
                store.transition_job(job, J.DELETED, _note(note, f"deleted with batch {batch.bid}"))
            elif job.status != J.DELETED:
                kept.append(f"{jid} ({job.status})")
    if kept:
        return deleted, "not deleted, only Failed or Held jobs can be: " + ", ".join(kept)
    return deleted


def _batch_purge(store: QueueStore, batch, params, note):
    removed = store.purge_batch(batch.bid)
    return None, f"removed with {len(removed)} job(s)"


def _move(target: str, what: str, kind: str = "job"):
    def run(store: QueueStore, item, params, note):
        mover = store.transition_job if kind == "job" else store.transition_batch
        return mover(item, target, _note(note, what))

    return run


def _collection(method: str):
    def run(store: QueueStore, mnemonic, params, note):
        if method == "hold_collection":
            by, _, reason = note.partition(": ")
            result = store.hold_collection(mnemonic, by=by, reason=reason)
        else:
            result = getattr(store, method)(mnemonic)
        if method == "release_collection_items":
            skipped = "; ".join(f"{k}: {v}" for k, v in result.skipped.items())
            return None, f"released {len(result.released)} item(s)" + (
                f"; not released: {skipped}" if skipped else ""
            )
        return None, "done" if result else "already so"

    return run


def _queue(method: str):
    def run(store: QueueStore, _item, params, note):
        return None, "done" if getattr(store, method)() else "already so"

    return run


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        Action("job.hold", "job", "Hold", OPERATOR, frozenset({J.PENDING}), _move(J.HELD, "held")),
        Action(
            "job.release",
            "job",
            "Release",
            OPERATOR,
            frozenset({J.HELD}),
            _move(J.PENDING, "released"),
        ),
        Action("job.resume", "job", "Resume", OPERATOR, frozenset({J.FAILED}), _job_resume),
        Action(
            "job.force_fail",
            "job",
            "Force fail",
            ADMINISTRATOR,
            RUNNING,
            lambda store, job, params, note: store.force_fail(job, _note(note, "force-failed")),
            warning="The job's lock and its object's storage and inventory locks are removed: a "
            "worker still running this step is cut off and its work is not committed.",
            locked_ok=True,
        ),
        Action(
            "job.delete", "job", "Delete", ADMINISTRATOR, frozenset({J.FAILED, J.HELD}), _job_delete
        ),
        Action(
            "batch.hold",
            "batch",
            "Hold",
            OPERATOR,
            frozenset({B.PENDING}),
            _move(B.HELD, "held", "batch"),
        ),
        Action(
            "batch.release",
            "batch",
            "Release",
            OPERATOR,
            frozenset({B.HELD}),
            _move(B.PENDING, "released", "batch"),
        ),
        Action(
            "batch.update_reporting",
            "batch",
            "Report again",
            OPERATOR,
            frozenset({B.FAILED}),
            _move(B.UPDATE_REPORTING, "report requested", "batch"),
        ),
        Action(
            "batch.delete",
            "batch",
            "Delete",
            ADMINISTRATOR,
            frozenset({B.FAILED, B.HELD}),
            _batch_delete,
        ),
        Action(
            "batch.purge",
            "batch",
            "Purge now",
            ADMINISTRATOR,
            frozenset({B.COMPLETED, B.DELETED}),
            _batch_purge,
            warning="The batch and all its jobs are removed from the queue for good.",
        ),
        Action(
            "collection.hold",
            "collection",
            "Hold",
            ADMINISTRATOR,
            run=_collection("hold_collection"),
        ),
        Action(
            "collection.release",
            "collection",
            "Release",
            ADMINISTRATOR,
            run=_collection("release_collection"),
        ),
        Action(
            "collection.release_all",
            "collection",
            "Release all held items",
            ADMINISTRATOR,
            run=_collection("release_collection_items"),
        ),
        Action("queue.pause", "queue", "Pause the queue", ADMINISTRATOR, run=_queue("pause_queue")),
        Action(
            "queue.resume", "queue", "Resume the queue", ADMINISTRATOR, run=_queue("unpause_queue")
        ),
    )
}


# --- who may act --------------------------------------------------------------------

RANK = {OPERATOR: 1, ADMINISTRATOR: 2}


def role_of(user) -> int:
    if not user.is_authenticated:
        return 0
    if user.is_superuser:
        return RANK[ADMINISTRATOR]
    names = set(user.groups.values_list("name", flat=True))
    return max((RANK[n] for n in names if n in RANK), default=0)


def may(user, action: Action) -> bool:
    return not settings.READ_ONLY and role_of(user) >= RANK[action.role]


def collections_of(user) -> set[str] | None:
    """The collections a person may act on; None means all."""
    scope = getattr(user, "scope", None) if user.is_authenticated else None
    return set(scope.collections) if scope and scope.collections else None


def refusal(user, action: Action) -> str | None:
    if settings.READ_ONLY:
        return "the queue is in read-only mode (READ_ONLY): no action can be taken"
    if not may(user, action):
        return f"{action.label} needs the {action.role} role"
    return None


# --- planning: what the confirmation page lists ---------------------------------------


@dataclass(frozen=True)
class Target:
    """An item as shown on the confirmation page."""

    id: str
    status: str = ""
    version: int | None = None
    collection: str = ""
    locked: bool = False


@dataclass(frozen=True)
class PlanItem:
    target: Target
    applies: bool
    why: str = ""


def plan(user, action: Action, targets: list[Target]) -> list[PlanItem]:
    """Whether the action applies to each item, and why not."""
    scope = collections_of(user)
    return [_judge(action, t, scope) for t in targets]


def _judge(action: Action, t: Target, scope: set[str] | None) -> PlanItem:
    if action.applies_to and t.status not in action.applies_to:
        allowed = ", ".join(sorted(action.applies_to))
        return PlanItem(t, False, f"it is {t.status}; {action.label.lower()} applies to {allowed}")
    if t.locked and not action.locked_ok:
        return PlanItem(t, False, "a worker is running a step on it (locked)")
    collection = t.id if action.scope == "collection" else t.collection
    if scope is not None and collection not in scope:
        return PlanItem(
            t, False, f"collection {collection or '(none)'} is outside your collections"
        )
    return PlanItem(t, True, _extra_note(action, t))


def _extra_note(action: Action, t: Target) -> str:
    if (
        action.name == "job.release"
        and t.collection
        and get_store(init=False).collection_held(t.collection)
    ):
        return f"warning: collection {t.collection} is still on hold, so the job will be held again"
    return action.warning


def steps_again(last_successful: str | None, step: str | None = None) -> list[str]:
    """The steps a resumed job runs again, from where it restarts to the end."""
    start = step or resume_target(last_successful)
    order = [J.PENDING, *JOB_STEPS]
    return order[order.index(start) :] if start in order else []


# --- execution -------------------------------------------------------------------------


def execute(
    user,
    action: Action,
    items: list[tuple[str, int | None]],
    reason: str,
    *,
    token: str,
    params: dict | None = None,
    selection: str = "",
) -> AdminAction:
    """Take ``action`` on ``items`` (id, version shown) and record it; idempotent by ``token``."""
    record, created = start(
        user, action, items, reason, token=token, params=params, selection=selection
    )
    if not created:  # the same confirmation submitted again: nothing is done twice
        return record
    return run_items(record)


def start(
    user,
    action: Action,
    items: list[tuple[str, int | None]],
    reason: str,
    *,
    token: str,
    params: dict | None = None,
    selection: str = "",
) -> tuple[AdminAction, bool]:
    """Check and record the action, acting on nothing yet; the record and whether it is new.

    ``run_items`` then acts, in the request or in ``steering.tasks.run_admin_action``.
    """
    problem = refusal(user, action)
    if problem:
        raise PermissionDenied(problem)
    if not reason.strip():
        raise ValueError("a reason is required")
    pending = [[item_id, version] for item_id, version in items]
    return _start(user, action, reason, token, params or {}, selection, pending)


def run_items(record: AdminAction) -> AdminAction:
    """Act on the record's pending items and finish it; safe to run again.

    An item that already has an ``AdminActionItem`` is not acted on again, so a task
    run twice (or resumed after its worker died) does each item at most once.
    """
    if record.finished:
        return record
    action = ACTIONS[record.action]
    user = record.user
    handled = set(record.items.values_list("item_id", flat=True))
    _recount(record)
    store = get_store()
    store.actor = f"admin:{record.username}"
    problem = refusal(user, action) if user is not None else "the person is gone"
    scope = collections_of(user) if user is not None else set()
    note = f"{record.username}: {record.reason}"
    for item_id, version in record.pending_items:
        if item_id in handled:
            continue
        if problem:
            _record_skip(record, item_id, problem)
        else:
            _one(store, action, record, item_id, version, scope, record.params or {}, note)
        handled.add(item_id)
        record.save(update_fields=["done", "skipped", "failed"])  # the progress bar
    record.finished = timezone.now()
    record.save(update_fields=["finished", "done", "skipped", "failed"])
    return record


def _recount(record: AdminAction) -> None:
    rows = record.items.order_by().values("result").annotate(n=Count("id"))
    counts = {r["result"]: r["n"] for r in rows}
    record.done, record.skipped, record.failed = (
        counts.get("done", 0),
        counts.get("skipped", 0),
        counts.get("failed", 0),
    )


def _record_skip(record: AdminAction, item_id: str, why: str) -> None:
    AdminActionItem.objects.create(
        admin_action=record, item_id=item_id, result="skipped", detail=why
    )
    record.skipped += 1


def _start(user, action, reason, token, params, selection, pending) -> tuple[AdminAction, bool]:
    try:
        with transaction.atomic():
            record = AdminAction.objects.create(
                user=user,
                username=user.get_username(),
                action=action.name,
                scope=action.scope,
                reason=reason.strip(),
                params=params,
                selection=selection,
                total=len(pending),
                token=token,
                pending_items=pending,
            )
            return record, True
    except IntegrityError:  # the same confirmation submitted again: nothing is done twice
        return AdminAction.objects.get(token=token), False


def _load(store: QueueStore, action: Action, item_id: str):
    if action.scope == "job":
        return store.get_job(item_id)
    if action.scope == "batch":
        return store.get_batch(item_id)
    return item_id


def _one(store, action, record, item_id, version, scope, params, note) -> None:
    row = AdminActionItem(admin_action=record, item_id=item_id)
    try:
        item = _load(store, action, item_id)
        before = Target(
            item_id,
            getattr(item, "status", ""),
            getattr(item, "status_version", None),
            getattr(item, "collection", None) or "",
            getattr(item, "locked", False),
        )
        row.before_status, row.before_version, row.collection = (
            before.status,
            before.version,
            before.collection,
        )
        if version is not None and before.version != version:
            raise ChangedUnderYou(f"changed since the page was shown: it is now {before.status}")
        judged = _judge(action, before, scope)
        if not judged.applies:
            raise ChangedUnderYou(judged.why)
        _outcome(row, action.run(store, item, params, note))
        row.result = "done"
    except ChangedUnderYou as e:
        row.result, row.detail = "skipped", str(e)
    except QueueError as e:
        row.result, row.detail = "failed", str(e)
    row.save()
    setattr(record, row.result, getattr(record, row.result) + 1)


def _outcome(row: AdminActionItem, result) -> None:
    after, detail = result if isinstance(result, tuple) else (result, "")
    row.detail = detail
    if after is not None:
        row.after_status, row.after_version = after.status, after.status_version
