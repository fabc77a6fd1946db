"""Taking an admin action (``steering.catalog``) on the items a person confirmed: permitted,
re-checked, audited.

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

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from jobs.models import Job
from merritt_queue.core.errors import ChangedUnderYou, QueueError
from merritt_queue.core.history import admin_actor
from merritt_queue.core.states import BatchStatus
from merritt_queue.core.store import QueueStore
from merritt_queue.project.runtime import get_store
from steering.catalog import ACTIONS, Action, note_of
from steering.models import AdminAction, AdminActionItem
from steering.planning import Target, collections_of, judge, profile_collections, refusal

B = BatchStatus
# Jobs per pipelined round of a bulk move: bounds the multis in flight and the progress step.
MOVE_CHUNK = 500


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
    store.act_as(admin_actor(record.username))
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
        moves.append((job, target, note_of(note, action.what), retry))
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
    judged = judge(action, before, scope, notes=False)
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
