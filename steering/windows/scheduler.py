"""Applying maintenance windows (``MaintenanceWindow``): the dispatcher's tick.

Each check (``apply_windows``, at the dispatcher's start and at least every
``MQ_WINDOW_CHECK_SECONDS``, and at each window's start and end) compares what the windows
want now with what they applied, which each window's row records:

- A window whose occurrence is on gets its hold (queue pause or collection hold) through the
  same core calls as the manual actions, also when it starts late (the dispatcher was down
  at its start). While it is on, a hold found off (a person released it) is put back: the
  window is ended early only by cancelling it.
- A window whose occurrence is over (or that was cancelled) releases what it applied, but
  only when a window set the hold (not a person before it), no person held it again by hand
  while it was on, and no other window on now wants it; for a collection, the jobs and
  batches its hold moved to Held are released too (not those a person held).
- An occurrence that began and ended while nothing checked is recorded as missed, not
  applied.

The row is written before ZooKeeper: a process stopped in between finds the occurrence
recorded as applied and puts the hold on at its next check, never applies or audits it
twice. Every start, end, put-back and miss is an audit row by ``scheduler`` with the
window's reason.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from merritt_queue.core.history import admin_actor
from merritt_queue.core.store import QueueStore
from steering.actions import accessqueue
from steering.models import AdminAction, AdminActionItem, MaintenanceWindow
from steering.windows.timing import Occurrence

log = logging.getLogger(__name__)

SCHEDULER = "scheduler"
# What the audit trail records of windows: the administrator's, then the scheduler's.
WINDOW_ACTIONS = (
    "window.create",
    "window.cancel",
    "window.start",
    "window.end",
    "window.reapply",
    "window.missed",
)
# The manual actions that put each kind of hold on: one taken during a window keeps it on.
HOLDS_BY_HAND = {
    MaintenanceWindow.QUEUE: "queue.pause",
    MaintenanceWindow.COLLECTION: "collection.hold",
    MaintenanceWindow.ACCESS_SMALL: "access.pause",
    MaintenanceWindow.ACCESS_LARGE: "access.pause",
}
ACCESS = MaintenanceWindow.ACCESS_SCOPES


def apply_windows(store: QueueStore, now: datetime | None = None) -> float | None:
    """One check of every window; the seconds until the next start or end (None: none)."""
    now = now or timezone.now()
    windows = list(_live())
    active = {w.pk: w.rule().active(now) for w in windows if w.cancelled is None}
    with store.changes.acting_as(admin_actor(SCHEDULER)):
        # Starts before ends: a window that begins as another on the same hold ends takes
        # the hold over, never lets it go for an instant.
        for w in windows:
            if (occurrence := active.get(w.pk)) is not None:
                _start(store, w.pk, occurrence, now)
        for w in windows:
            occurrence = active.get(w.pk)
            if w.applied_start is not None and (
                occurrence is None or occurrence.start != w.applied_start
            ):
                _end(store, w.pk, now, active)
        for w in windows:
            if w.cancelled is None:
                _record_missed(w.pk, now)
    return _next_change(windows, now)


def end_now(store: QueueStore, window: MaintenanceWindow) -> None:
    """End a cancelled window's occurrence at once (the cancel page), as a check would."""
    now = timezone.now()
    active = {w.pk: w.rule().active(now) for w in _live() if w.cancelled is None}
    with store.changes.acting_as(admin_actor(SCHEDULER)):
        _end(store, window.pk, now, active)


def _live():
    """The windows a check looks at: not over for good, or still holding something."""
    return MaintenanceWindow.objects.filter(cancelled__isnull=True).exclude(
        recurrence=MaintenanceWindow.ONCE, handled_until__isnull=False
    ) | MaintenanceWindow.objects.filter(applied_start__isnull=False)


# --- the hold, whichever kind --------------------------------------------------------------


def target_id(w: MaintenanceWindow) -> str:
    """The audit rows' item: the queue's lock name (an access queue's name), or the
    collection's mnemonic."""
    if w.scope in ACCESS:
        return ACCESS[w.scope]
    return "ingest" if w.scope == MaintenanceWindow.QUEUE else w.collection


def _is_on(store: QueueStore, w: MaintenanceWindow) -> bool:
    if w.scope in ACCESS:
        return accessqueue.paused(store, ACCESS[w.scope])
    if w.scope == MaintenanceWindow.QUEUE:
        return store.pause.queue_paused()
    return store.holds.is_collection_held(w.collection)


def _put_on(store: QueueStore, w: MaintenanceWindow) -> None:
    if w.scope in ACCESS:
        accessqueue.set_paused(store, ACCESS[w.scope], True)
    elif w.scope == MaintenanceWindow.QUEUE:
        store.pause.pause_queue()
    else:
        store.holds.hold_collection(w.collection, by=SCHEDULER, reason=f"window {w.pk}: {w.reason}")


def _take_off(store: QueueStore, w: MaintenanceWindow) -> str:
    if w.scope in ACCESS:
        accessqueue.set_paused(store, ACCESS[w.scope], False)
        return f"resumed the {w.target}"
    if w.scope == MaintenanceWindow.QUEUE:
        store.pause.unpause_queue()
        return "resumed the queue"
    store.holds.release_collection(w.collection)
    freed = store.held.release_collection_items(
        w.collection, f"released at the end of maintenance window {w.pk}", by_hold_only=True
    )
    return f"released collection {w.collection} and {len(freed.released)} item(s) its hold held"


def _put_on_words(w: MaintenanceWindow) -> str:
    if w.scope in ACCESS:
        return f"paused the {w.target}"
    return "paused the queue" if w.scope == w.QUEUE else f"held {w.target}"


def _same_hold(w: MaintenanceWindow):
    rows = MaintenanceWindow.objects.filter(scope=w.scope).exclude(pk=w.pk)
    return rows.filter(collection=w.collection) if w.scope == MaintenanceWindow.COLLECTION else rows


# --- start, end, missed ---------------------------------------------------------------------


def _start(store: QueueStore, pk: int, occurrence: Occurrence, now: datetime) -> None:
    with transaction.atomic():
        w = MaintenanceWindow.objects.select_for_update().get(pk=pk)
        if w.cancelled is not None:
            return
        if w.applied_start == occurrence.start:
            if not _is_on(store, w):  # released by hand while the window is on
                _put_on(store, w)
                w.owns_hold = True
                w.save(update_fields=["owns_hold"])
                _audit(
                    w,
                    "reapply",
                    "the hold was off during the window (released by hand): "
                    "put back; cancel the window to end it early",
                )
            return
        if w.handled_until is not None and occurrence.end <= w.handled_until:
            return
        if w.applied_start is not None:  # its previous occurrence, never ended: end it first
            _end_locked(store, w, now, keep_for=[w])
        on = _is_on(store, w)
        others = list(_same_hold(w).filter(applied_start__isnull=False))
        # Its own earlier occurrence, just ended, may hand the hold on to this one.
        w.owns_hold = not on or w.owns_hold or any(o.owns_hold for o in others)
        w.applied_start, w.applied_end, w.applied_at = occurrence.start, occurrence.end, now
        w.save(update_fields=["owns_hold", "applied_start", "applied_end", "applied_at"])
        late = f" (late: it began at {_utc(occurrence.start)})" if occurrence.start < now else ""
        if on:
            who = ", ".join(f"window {o.pk}" for o in others) or "a person"
            detail = f"already on, set by {who}: left as it is{late}"
        else:
            detail = f"{_put_on_words(w)}{late}"
        _audit(w, "start", f"{detail}; until {_utc(occurrence.end)}", occurrence)
        if not on:
            _put_on(store, w)


def _end(store: QueueStore, pk: int, now: datetime, active: dict) -> None:
    with transaction.atomic():
        w = MaintenanceWindow.objects.select_for_update().get(pk=pk)
        on_now = active.get(pk)
        if w.applied_start is None or (on_now is not None and on_now.start == w.applied_start):
            return
        wanting = [
            o
            for o in _same_hold(w).filter(pk__in=[k for k, occ in active.items() if occ])
            if o.cancelled is None
        ]
        _end_locked(store, w, now, keep_for=wanting)


def _end_locked(store: QueueStore, w: MaintenanceWindow, now: datetime, keep_for: list) -> None:
    """End ``w``'s applied occurrence; the hold stays while a window of ``keep_for`` wants it."""
    assert w.applied_start is not None
    occurrence = Occurrence(w.applied_start, w.applied_end or now)
    cut = " (cancelled)" if w.cancelled is not None and occurrence.end > now else ""
    by_hand = _held_by_hand(w)
    if keep_for:
        if w.owns_hold:
            for o in keep_for:
                if o.pk != w.pk:
                    MaintenanceWindow.objects.filter(pk=o.pk).update(owns_hold=True)
        names = ", ".join(f"window {o.pk}" for o in keep_for)
        detail, release = f"ended{cut}; the hold stays on: {names} wants it", False
    elif not w.owns_hold:
        detail, release = f"ended{cut}; the hold stays on: a person set it before the window", False
    elif by_hand is not None:
        detail, release = (
            f"ended{cut}; the hold stays on: {by_hand.username} held it by hand during the "
            f"window ({_utc(by_hand.started)})",
            False,
        )
    else:
        detail, release = f"ended{cut}", True
    keep_own = any(o.pk == w.pk for o in keep_for)
    w.handled_until = max(filter(None, [w.handled_until, min(occurrence.end, now)]))
    w.applied_start = w.applied_end = w.applied_at = None
    w.owns_hold = w.owns_hold and keep_own
    w.save(
        update_fields=["handled_until", "applied_start", "applied_end", "applied_at", "owns_hold"]
    )
    if release:
        detail += "; " + _take_off(store, w)
    _audit(w, "end", detail, occurrence)


def _held_by_hand(w: MaintenanceWindow) -> AdminAction | None:
    """The latest hold a person put on by hand (done, not refused) since ``w`` applied."""
    if w.applied_at is None:
        return None
    return (
        AdminAction.objects.filter(
            action=HOLDS_BY_HAND[w.scope],
            started__gte=w.applied_at,
            items__item_id=target_id(w),
            items__result="done",
        )
        .exclude(username=SCHEDULER)
        .order_by("-started")
        .first()
    )


def _record_missed(pk: int, now: datetime) -> None:
    with transaction.atomic():
        w = MaintenanceWindow.objects.select_for_update().get(pk=pk)
        since = w.handled_until or w.created
        missed = [o for o in w.rule().ended_between(since, now) if o.start != w.applied_start]
        if not missed:
            return
        for o in missed:
            _audit(
                w,
                "missed",
                f"missed: it began and ended while no dispatcher was running "
                f"({_utc(o.start)} to {_utc(o.end)}); nothing was applied",
                o,
                result="skipped",
            )
        w.handled_until = missed[-1].end
        w.save(update_fields=["handled_until"])


def _next_change(windows: Iterable[MaintenanceWindow], now: datetime) -> float | None:
    moments = []
    for w in windows:
        if w.cancelled is not None:
            continue
        rule = w.rule()
        if (on := rule.active(now)) is not None:
            moments.append(on.end)
        if (later := rule.next_after(now)) is not None:
            moments.append(later.start)
    return min((m - now).total_seconds() for m in moments) if moments else None


# --- the audit trail ------------------------------------------------------------------------


def _audit(
    w: MaintenanceWindow,
    event: str,
    detail: str,
    occurrence: Occurrence | None = None,
    *,
    result: str = "done",
) -> None:
    params: dict = {"window": w.pk}
    if occurrence is not None:
        params |= {"start": occurrence.start.isoformat(), "end": occurrence.end.isoformat()}
    record = AdminAction.objects.create(
        user=None,
        username=SCHEDULER,
        action=f"window.{event}",
        scope=w.scope,
        reason=w.reason,
        params=params,
        total=1,
        done=int(result == "done"),
        skipped=int(result == "skipped"),
        finished=timezone.now(),
        token=uuid.uuid4().hex,
    )
    AdminActionItem.objects.create(
        admin_action=record,
        item_id=target_id(w),
        collection=w.collection,
        result=result,
        detail=f"window {w.pk}: {detail}",
    )
    log.info("maintenance window %s (%s): %s", w.pk, w.target, detail)


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
