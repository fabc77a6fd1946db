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

from batches.models import Profile, mnemonic_problem
from jobs.models import Job
from merritt_queue.errors import ChangedUnderYou, QueueError
from merritt_queue.runtime import get_store
from merritt_queue.states import JOB_STEPS, BatchStatus, JobStatus, resume_target
from merritt_queue.store import QueueStore
from merritt_queue.uploads import remove_upload, uploads_root

from .models import ADMINISTRATOR, OPERATOR, AdminAction, AdminActionItem, group_names

J, B = JobStatus, BatchStatus
RUNNING = frozenset({J.PENDING, *JOB_STEPS})
# Jobs per pipelined round of a bulk move: bounds the multis in flight and the progress step.
MOVE_CHUNK = 500


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
    # Job actions that are one status move: ``move(store, job, params) -> (status, retry)``
    # and ``after(job)`` once it is written, in place of ``run``: execution pipelines them.
    move: Callable | None = field(default=None, repr=False)
    after: Callable | None = field(default=None, repr=False)
    what: str = ""  # the past tense the job's message gets: "resumed by <who>: <reason>"
    # Why the action does not apply to a status, where "it applies to X" would not help.
    refusals: dict = field(default_factory=dict, repr=False)
    refused_in_deleted_batch: bool = False  # a job move that would bring a job back to work


# --- what each action does through the core ----------------------------------------


def _note(user_note: str, what: str) -> str:
    return f"{what} by {user_note}"


def _job_move(name, label, role, applies_to, move, what, after=None, **extra) -> Action:
    """An action that moves a job; ``run_items`` moves its jobs in pipelined chunks, one
    job or thousands alike (``_move_chunk``)."""
    return Action(
        name,
        "job",
        label,
        role,
        frozenset(applies_to),
        move=move,
        after=after,
        what=what,
        **extra,
    )


def _remove_work_dir(job) -> None:
    shutil.rmtree(Path(settings.MQ_WORK_DIR) / "jobs" / job.jid, ignore_errors=True)


def _batch_delete(store: QueueStore, batch, params, note):
    """The batch and those of its jobs that can be deleted; the others are listed.

    The jobs are read and moved in pipelined rounds (``job_heads``, ``move_jobs``), not
    one round trip each: a batch can hold thousands.
    """
    deleted = store.transition_batch(batch, B.DELETED, _note(note, "deleted"))
    jids = [jid for group in store.batch_jobs(batch.bid).values() for jid in group]
    heads = store.job_heads(jids)
    message = _note(note, f"deleted with batch {batch.bid}")
    moves, kept = [], []
    for jid in jids:
        job = heads[jid]
        if isinstance(job, QueueError):
            raise job
        if job.status in (J.FAILED, J.HELD):
            moves.append((job, J.DELETED, message, False))
        elif job.status != J.DELETED:
            kept.append(f"{jid} ({job.status})")
    with store.deferred_changes():
        written = store.move_jobs(moves)
    for result in written:
        if isinstance(result, QueueError):
            raise result
    if kept:  # their upload stays while they run; cleanup removes it after the purge
        return deleted, "not deleted, only Failed or Held jobs can be: " + ", ".join(kept)
    _remove_upload(batch)
    return deleted


def _remove_upload(batch) -> None:
    remove_upload(uploads_root(settings.MQ_WORK_DIR), (batch.submission or {}).get("payload_url"))


def _batch_purge(store: QueueStore, batch, params, note):
    removed = store.purge_batch(batch.bid)
    _remove_upload(batch)
    return None, f"removed with {len(removed)} job(s)"


def _to(target: str):
    return lambda store, job, params: (target, False)


def _deleted_batches(store: QueueStore, action: Action, heads) -> set[str]:
    """Of the batches of ``heads`` (jobs read, or errors), those that are Deleted, read in one
    pipelined round; only for an action that would bring a job back to work, which would
    recreate its batch's ``batch-processing``, and MerrittZK's reporting throws on a Deleted
    batch it finds there (issue 13)."""
    if not action.refused_in_deleted_batch:
        return set()
    bids = {job.bid for job in heads if not isinstance(job, QueueError) and job.bid}
    statuses = store.batch_statuses(bids)
    return {bid for bid, got in statuses.items() if got.get("status") == B.DELETED}


def _batch_move(name: str, label: str, applies_to, target: str, what: str) -> Action:
    """An operator's action that moves a batch from ``applies_to`` to ``target``."""

    def run(store: QueueStore, batch, params, note):
        return store.transition_batch(batch, target, _note(note, what))

    return Action(name, "batch", label, OPERATOR, frozenset(applies_to), run)


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
        _job_move("job.hold", "Hold", OPERATOR, {J.PENDING}, _to(J.HELD), "held"),
        _job_move(
            "job.release",
            "Release",
            OPERATOR,
            {J.HELD},
            _to(J.PENDING),
            "released",
            refused_in_deleted_batch=True,
        ),
        _job_move(
            "job.resume",
            "Resume",
            OPERATOR,
            {J.FAILED},
            lambda store, job, params: (store.resume_step(job, params.get("step") or None), True),
            "resumed",
            refused_in_deleted_batch=True,
        ),
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
        _job_move(
            "job.delete",
            "Delete",
            ADMINISTRATOR,
            {J.FAILED, J.HELD},
            _to(J.DELETED),
            "deleted",
            after=_remove_work_dir,
            refusals={
                J.COMPLETED: "Completed is final in the queue (zk-tree.md); a completed job "
                "is removed with its batch (Purge now on the batch)"
            },
        ),
        _batch_move("batch.hold", "Hold", {B.PENDING}, B.HELD, "held"),
        _batch_move("batch.release", "Release", {B.HELD}, B.PENDING, "released"),
        _batch_move(
            "batch.update_reporting",
            "Report again",
            {B.FAILED},
            B.UPDATE_REPORTING,
            "report requested",
        ),
        Action(
            "batch.delete",
            "batch",
            "Delete",
            ADMINISTRATOR,
            frozenset({B.FAILED, B.HELD}),
            _batch_delete,
            refusals={
                B.COMPLETED: "Completed is final in the queue (zk-tree.md); use Purge now to "
                "remove the batch and its jobs"
            },
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
    return max((RANK[n] for n in group_names(user) if n in RANK), default=0)


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


def _judge(action: Action, t: Target, scope: set[str] | None, *, notes: bool = True) -> PlanItem:
    if action.scope == "collection" and (why := mnemonic_problem(t.id)):
        return PlanItem(t, False, why)
    if action.applies_to and t.status in action.refusals:
        return PlanItem(t, False, f"it is {t.status}: {action.refusals[t.status]}")
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
    return PlanItem(t, True, _extra_note(action, t) if notes else "")


def _extra_note(action: Action, t: Target) -> str:
    if (
        action.name == "job.release"
        and t.collection
        and get_store(init=False).collection_held(t.collection)
    ):
        return f"warning: collection {t.collection} is still on hold, so the job will be held again"
    return action.warning


def profile_collections() -> dict[str, str]:
    """Each profile's collection: a mirror row of Merritt's names only its profile."""
    return dict(Profile.objects.values_list("name", "collection"))


def resume_offer(job) -> list[str]:
    """The steps a resume of ``job`` (anything with jid, status, last_successful_status)
    may restart at: the run's own check (``QueueStore.resume_step``) asked of each step, so
    a confirmation page built from it offers exactly what the run will accept."""
    offered = []
    for step in (J.PENDING, *JOB_STEPS):
        try:
            QueueStore.resume_step(job, step)
        except QueueError:
            continue
        offered.append(step)
    return offered


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
    todo = [(i, v) for i, v in record.pending_items if i not in handled]
    if action.move is not None and not problem:
        for start in range(0, len(todo), MOVE_CHUNK):
            _move_chunk(store, action, record, todo[start : start + MOVE_CHUNK], scope, note)
    else:
        for item_id, version in todo:
            if problem:
                _record_skip(record, item_id, problem)
            else:
                _one(store, action, record, item_id, version, scope, record.params or {}, note)
            record.save(update_fields=["done", "skipped", "failed"])  # the progress bar
    record.finished = timezone.now()
    record.save(update_fields=["finished", "done", "skipped", "failed"])
    return record


def _move_chunk(store, action, record, chunk, scope, note) -> None:
    """Judge and move a chunk of jobs with pipelined reads and multis; record each item.

    The same checks as ``_one`` (version shown, status, lock, collection) on a fresh
    read; each move is still its own version-checked multi. The audit rows and the
    progress are written after the moves: if the process dies in between, the moved
    jobs are at a new version, so running the action again skips them, never twice.
    """
    params = record.params or {}
    ids = [item_id for item_id, _ in chunk]
    shown = dict(chunk)
    rows = Job.objects.filter(jid__in=ids).values_list(
        "jid", "collection", "profile", "status_version", "batch_id", "priority"
    )
    by_profile = profile_collections()
    collections, known = {}, {}
    for jid, collection, profile, version, bid, priority in rows:
        collections[jid] = collection or by_profile.get(profile, "")
        if version == shown[jid]:  # the row the page showed: its batch and priority hold
            known[jid] = (version, bid, priority)
    heads = store.job_heads(ids, known)
    deleted = _deleted_batches(store, action, heads.values())
    rows, moves, moving = [], [], []
    for item_id, version in chunk:
        row = AdminActionItem(admin_action=record, item_id=item_id)
        rows.append(row)
        job = heads[item_id]
        try:
            if isinstance(job, QueueError):
                raise job
            if item_id not in collections:  # not mirrored yet: read its configuration
                collections[item_id] = store.item_collection(store.get_job(item_id).configuration)
            before = Target(
                item_id, job.status, job.status_version, collections[item_id], job.locked
            )
            _recheck(row, action, before, version, scope)
            if job.bid in deleted:
                raise QueueError(
                    f"job {job.jid} was not moved: its batch {job.bid} is Deleted. "
                    "Submit the object again in a new batch instead."
                )
            target, retry = action.move(store, job, params)
        except ChangedUnderYou as e:
            row.result, row.detail = "skipped", str(e)
            continue
        except QueueError as e:
            row.result, row.detail = "failed", str(e)
            continue
        moves.append((job, target, _note(note, action.what), retry))
        moving.append(row)
    with store.deferred_changes():
        written = store.move_jobs(moves)
    for row, result in zip(moving, written, strict=True):
        if isinstance(result, ChangedUnderYou):
            row.result, row.detail = "skipped", str(result)
        elif isinstance(result, QueueError):
            row.result, row.detail = "failed", str(result)
        else:
            row.result = "done"
            row.after_status, row.after_version = result.status, result.status_version
            if action.after is not None:
                action.after(result)
    with transaction.atomic():
        AdminActionItem.objects.bulk_create(rows, batch_size=500)
        for row in rows:
            setattr(record, row.result, getattr(record, row.result) + 1)
        record.save(update_fields=["done", "skipped", "failed"])  # the progress bar


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


def _collection_of(store: QueueStore, item) -> str:
    """A job's or batch's collection, also when Merritt wrote it (it names only a profile)."""
    if isinstance(item, str):  # a collection or the queue
        return ""
    data = getattr(item, "configuration", None) or getattr(item, "submission", None)
    return store.item_collection(data)


def _recheck(row, action: Action, before: Target, version, scope) -> None:
    """Record the item as read now; ``ChangedUnderYou`` unless it is as shown and the action
    still applies to it."""
    row.before_status, row.before_version, row.collection = (
        before.status,
        before.version,
        before.collection,
    )
    if version is not None and before.version != version:
        raise ChangedUnderYou(f"changed since the page was shown: it is now {before.status}")
    judged = _judge(action, before, scope, notes=False)
    if not judged.applies:
        raise ChangedUnderYou(judged.why)


def _one(store, action, record, item_id, version, scope, params, note) -> None:
    row = AdminActionItem(admin_action=record, item_id=item_id)
    try:
        item = _load(store, action, item_id)
        before = Target(
            item_id,
            getattr(item, "status", ""),
            getattr(item, "status_version", None),
            _collection_of(store, item),
            getattr(item, "locked", False),
        )
        _recheck(row, action, before, version, scope)
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
