"""Taking an admin action (``steering.actions.catalog``) on the items a person confirmed: permitted,
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

Every action runs through ``_run_chunk``: read the items, re-check each, apply the action to
those that pass, record the results. A batched action gets its items a chunk at a time with
pipelined reads and multis; any other, one at a time.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone

from jobs.models import Job
from merritt_queue.core.approval import shown_status
from merritt_queue.core.errors import ChangedUnderYou, QueueError, ZooKeeperUnreachable
from merritt_queue.core.history import admin_actor
from merritt_queue.core.store import QueueStore
from merritt_queue.project.runtime import deadline_left, get_store, unreachable
from merritt_queue.project.zkdeadline import UNREACHABLE
from steering.actions import accessqueue, breakerswitch, wholefilter, workerdrain
from steering.actions.catalog import ACTIONS
from steering.actions.kinds import Action, Scope, Target
from steering.actions.planning import profile_collections
from steering.actions.results import Applied, ItemResult, PartlyDone
from steering.actions.staleness import changed_since
from steering.models import AdminAction, AdminActionItem
from steering.permissions import collections_of, refusal

# Items per round of a batched action: bounds the multis in flight and the progress step.
MOVE_CHUNK = 500
# A record's params key: the collections of the person who asked for it (a deletion request
# approved by another), so the run acts only where both may.
WITHIN_KEY = "within_collections"


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
    run twice (or resumed after its worker died) does each item at most once. A summarised
    selection (``wholefilter``) is read again from the mirror a chunk at a time: no list of
    every item is held, in the record or in memory.
    """
    if record.finished:
        return record
    action = ACTIONS[record.action]
    user = record.user
    _recount(record)
    problem = refusal(user, action) if user is not None else "the person is gone"
    scope = acting_scope(record)
    note = f"{record.username}: {record.reason}"
    size = MOVE_CHUNK if action.batched else 1
    stream = wholefilter.Stream(record, action, scope) if wholefilter.filtered(record) else None
    source = stream if stream is not None else _listed(record, size)
    left: list = []
    try:
        store = get_store()
        # The person's name for these writes only: one store serves every thread of the process.
        with store.changes.acting_as(admin_actor(record.username)):
            for chunk, stale in source:
                left = chunk
                if stale:
                    record_skipped(record, stale)
                if chunk:
                    _run_chunk(store, action, record, chunk, scope, problem, note)
                left = []
    except UNREACHABLE as e:
        if deadline_left() is None:  # a worker's task: it fails, and is run again
            raise
        if stream is None:
            handled = set(record.items.filter(part_of="").values_list("item_id", flat=True))
            left = [(i, v) for i, v in record.pending_items if i not in handled]
        raise _unreachable(record, left) from e
    if stream is not None:
        stream.finish()
    record.finished = timezone.now()
    record.save(update_fields=["finished", "done", "skipped", "failed"])
    return record


def acting_scope(record: AdminAction) -> set[str] | None:
    """The collections the run of ``record`` may act on (None: all): its person's, narrowed
    to the asker's when another person asked for it (``WITHIN_KEY``)."""
    if record.user is None:
        return set()
    scope = collections_of(record.user)
    within = (record.params or {}).get(WITHIN_KEY)
    if within is None:
        return scope
    return set(within) if scope is None else scope & set(within)


def _listed(record: AdminAction, size: int):
    """The record's own list of items (a selection the page listed) not acted on yet, a
    chunk at a time."""
    handled = set(record.items.filter(part_of="").values_list("item_id", flat=True))
    todo = [(i, v) for i, v in record.pending_items if i not in handled]
    for first in range(0, len(todo), size):
        yield todo[first : first + size], []


def record_skipped(record: AdminAction, why: list[tuple[str, str]]) -> None:
    """Audit items skipped before any read of ZooKeeper (their mirror row changed since the
    page was shown), with why."""
    with transaction.atomic():
        record.skipped += _audit_items(record, "skipped", why)
        record.save(update_fields=["done", "skipped", "failed"])


def _audit_items(record: AdminAction, result: str, why: list[tuple[str, str]]) -> int:
    """Audit each item of ``why`` (id, words) with ``result``; how many."""
    rows = [
        AdminActionItem(admin_action=record, item_id=i, result=result, detail=words)
        for i, words in why
    ]
    AdminActionItem.objects.bulk_create(rows, batch_size=500)
    return len(rows)


def run_slice(record: AdminAction, chunk: list[tuple[str, int | None]]) -> None:
    """Act now on ``chunk``, some of the record's items (a resume run's slice,
    ``steering.runs.driver``), judged and audited as ``run_items`` does each chunk."""
    action = ACTIONS[record.action]
    user = record.user
    problem = refusal(user, action) if user is not None else "the person is gone"
    scope = acting_scope(record)
    store = get_store()
    with store.changes.acting_as(admin_actor(record.username)):
        _run_chunk(
            store, action, record, chunk, scope, problem, f"{record.username}: {record.reason}"
        )


def _unreachable(record: AdminAction, left) -> ZooKeeperUnreachable:
    """Finish a web request's action that ZooKeeper stopped answering: the items not yet
    recorded are recorded as not done, and the error says what was."""
    why = "ZooKeeper was not reachable: not done"
    with transaction.atomic():
        record.failed += _audit_items(record, "failed", [(i, why) for i, _ in left])
        record.finished = timezone.now()
        record.save(update_fields=["finished", "done", "skipped", "failed"])
    message = unreachable(settings.ZK_HOSTS, settings.MQ_WEB_ZK_WAIT)
    if record.done:
        message = message.replace(
            "nothing was changed",
            f"{record.done} of the {record.total} items were done before it went away and "
            "the others were not",
        )
    return ZooKeeperUnreachable(message)


def _run_chunk(store, action, record, chunk, scope, problem, note) -> None:
    """Read, re-check, act on and record a chunk of items.

    Each item is judged on a fresh read (version shown, status, lock, collection); each
    change is still its own version-checked multi. The audit rows and the progress are
    written after the changes: if the process dies in between, the changed items are at a
    new version, so running the action again skips them, never acts twice.
    """
    rows = [AdminActionItem(admin_action=record, item_id=item_id) for item_id, _ in chunk]
    along: list[AdminActionItem] = []
    if problem:
        for row in rows:
            row.result, row.detail = "skipped", problem
    else:
        read = _read(store, action, chunk)
        ready, items = [], []
        for row, (item_id, version) in zip(rows, chunk, strict=True):
            got = read[item_id]
            if isinstance(got, QueueError):
                _record(row, got)
                continue
            before, item = got
            try:
                _recheck(row, action, before, version, scope, _history(store, item, version))
            except ChangedUnderYou as e:
                _record(row, e)
                continue
            ready.append(row)
            items.append(item)
        if items:
            results = action.apply(store, items, record.params or {}, note)
            for row, result in zip(ready, results, strict=True):
                _record(row, result)
                along.extend(_along(row, result))
    with transaction.atomic():
        AdminActionItem.objects.bulk_create(rows + along, batch_size=500)
        for row in rows:
            setattr(record, row.result, getattr(record, row.result) + 1)
        record.save(update_fields=["done", "skipped", "failed"])  # the progress bar


# --- reading the items again ------------------------------------------------------------


def _read(store: QueueStore, action: Action, chunk) -> dict:
    """Each item of ``chunk`` read now: ``(Target, item)`` or the ``QueueError`` reading it
    met. Jobs of a batched action in one pipelined round; anything else one at a time."""
    if action.batched:
        return _read_jobs(store, chunk)
    read: dict = {}
    for item_id, _ in chunk:
        try:
            item = _load(store, action, item_id)
        except QueueError as e:
            read[item_id] = e
            continue
        before = Target(
            item_id,
            shown_status(getattr(item, "status", ""), getattr(item, "approval", None)),
            getattr(item, "status_version", None),
            _collection_of(store, item),
            getattr(item, "locked", False),
        )
        read[item_id] = (before, item)
    return read


def _read_jobs(store: QueueStore, chunk) -> dict:
    """The jobs of ``chunk`` in one pipelined round; what the mirror knows at the version
    shown (batch, priority, collection) spares reading it again."""
    ids = [item_id for item_id, _ in chunk]
    shown = dict(chunk)
    rows = Job.objects.filter(jid__in=ids).values_list(
        "jid", "collection", "profile", "status_version", "batch_id", "priority"
    )
    by_profile = profile_collections()
    collections: dict[str, str] = {}
    known: dict[str, tuple] = {}
    for jid, collection, profile, version, bid, priority in rows:
        collections[jid] = collection or by_profile.get(profile, "")
        if version == shown[jid]:  # the row the page showed: its batch and priority hold
            known[jid] = (version, bid, priority)
    heads = store.jobs.job_heads(ids, known)
    read: dict = {}
    for item_id in ids:
        job = heads[item_id]
        try:
            if isinstance(job, QueueError):
                raise job
            if item_id not in collections:  # not mirrored yet: read its configuration
                collections[item_id] = store.holds.item_collection(
                    store.jobs.get_job(item_id).configuration
                )
        except QueueError as e:
            read[item_id] = e
            continue
        before = Target(item_id, job.status, job.status_version, collections[item_id], job.locked)
        read[item_id] = (before, job)
    return read


def _load(store: QueueStore, action: Action, item_id: str):
    if action.scope == Scope.JOB:
        return store.jobs.get_job(item_id)
    if action.scope == Scope.BATCH:
        return store.batches.get_batch(item_id)
    if action.scope == Scope.WORKER:
        return workerdrain.read_worker(item_id)
    if action.scope == Scope.DEPENDENCY:
        return breakerswitch.read_dependency(item_id)
    if action.scope == Scope.ACCESS:
        return accessqueue.read_request(store, item_id)
    if action.scope == Scope.ACCESS_QUEUE:
        return accessqueue.read_queue(store, item_id)
    return item_id


def _collection_of(store: QueueStore, item) -> str:
    """A job's or batch's collection, also when Merritt wrote it (it names only a profile)."""
    if isinstance(item, accessqueue.Request):
        return item.collection
    # a collection, the queue, a worker, a dependency, an access queue
    if isinstance(
        item,
        str | workerdrain.WorkerItem | breakerswitch.DependencyItem | accessqueue.QueueItem,
    ):
        return ""
    data = getattr(item, "configuration", None) or getattr(item, "submission", None)
    return store.holds.item_collection(data)


def _history(store: QueueStore, item, shown: int | None):
    """The item's history when it changed since the version ``shown``, to say what changed: a
    batched action's records are read without it, so it is read then, for those items only."""
    history = getattr(item, "history", None)
    if history is not None or shown is None or getattr(item, "status_version", shown) == shown:
        return history
    try:
        return store.jobs.get_job(item.jid).history if hasattr(item, "jid") else None
    except QueueError:
        return None


def _recheck(row, action: Action, before: Target, version, scope, history=None) -> None:
    """Record the item as read now; ``ChangedUnderYou`` unless it is as shown and the action
    still applies to it, saying what changed and by whom when the item's ``history`` was
    read with it."""
    row.before_status, row.before_version, row.collection = (
        before.status,
        before.version,
        before.collection,
    )
    if version is not None and before.version != version:
        raise ChangedUnderYou(changed_since(version, before.status, before.version, history))
    why = action.check(before, scope)
    if why is not None:
        raise ChangedUnderYou(why)


# --- the audit trail --------------------------------------------------------------------


def _record(row: AdminActionItem, result: ItemResult) -> None:
    """An item's result on its audit row: done, skipped (it changed) or failed."""
    if isinstance(result, ChangedUnderYou):
        row.result, row.detail = "skipped", str(result)
    elif isinstance(result, QueueError):
        row.result, row.detail = "failed", str(result)
    else:
        assert isinstance(result, Applied)
        row.result, row.detail = "done", result.detail
        if result.after is not None:
            row.after_status = result.after.status
            row.after_version = result.after.status_version


def _along(row: AdminActionItem, result: ItemResult) -> list[AdminActionItem]:
    """The audit rows of the items acted on with ``row``'s item (a batch's jobs, a
    collection's held items), whether the action then succeeded on the item or not
    (``PartlyDone``)."""
    if not isinstance(result, Applied | PartlyDone):
        return []
    scope = row.admin_action.scope
    return [
        AdminActionItem(
            admin_action=row.admin_action,
            item_id=getattr(before, "jid", None) or before.bid,
            collection=row.collection,
            before_status=before.status,
            before_version=before.status_version,
            after_status=after.status,
            after_version=after.status_version,
            result="done",
            detail=f"with {scope} {row.item_id}",
            part_of=row.item_id,
        )
        for before, after in result.along
    ]


def _recount(record: AdminAction) -> None:
    rows = record.items.filter(part_of="").order_by().values("result").annotate(n=Count("id"))
    counts = {r["result"]: r["n"] for r in rows}
    record.done, record.skipped, record.failed = (
        counts.get("done", 0),
        counts.get("skipped", 0),
        counts.get("failed", 0),
    )


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
                total=len(pending) or int(params.get(wholefilter.COUNTED_KEY, 0)),
                token=token,
                pending_items=pending,
            )
            return record, True
    except IntegrityError:  # the same confirmation submitted again: nothing is done twice
        return AdminAction.objects.get(token=token), False
