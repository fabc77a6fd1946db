"""Advancing the resume runs (``ResumeRun``): the dispatcher's tick, as the maintenance
windows' scheduler is (``merritt_queue.project.periodic``).

Each check of a live run:

1. settles its resumed jobs from the mirror: Completed, Failed again (with the cause, the
   message's signature) or Deleted;
2. stops it, when more than its share of the resumed jobs that finished failed again with
   one cause (``progress.stop_reason``), saying so on its page and in the audit trail;
3. while it runs, resumes the next slice: as many as its pace allows now (per minute, or
   up to N in flight), at most ``MQ_RESUME_SLICE``, read from its items a slice at a time,
   never all at once.

A run is advanced under its row's lock, so two dispatchers never send one slice twice. A
slice's items are marked ``sending`` before ZooKeeper is written, and their results read
back from the audit rows the resume writes (``execution.run_slice``). A process stopped
mid-slice leaves them waiting or sending, as far as its database transaction got: the next
check takes the result of those the audit recorded, and gives the others to the resume
again, whose version check (the version the confirmation showed) refuses a job that moved:
it is counted as skipped, never resumed twice.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from jobs.models import Job
from merritt_queue.core.states import JobStatus
from merritt_queue.core.store import QueueStore
from steering.actions.execution import record_skipped, run_slice
from steering.models import AdminAction, ResumeRun, ResumeRunItem
from steering.runs.progress import progress, stop_reason
from ui import quarantine
from ui.signatures import cause_of

log = logging.getLogger(__name__)

I = ResumeRunItem  # noqa: E741
# Who the audit trail names for a run's own stop.
RUN_ACTOR = "resume run"
# How soon a run with jobs in flight is looked at again.
POLL_SECONDS = 5.0
CHUNK = 500  # rows per query when settling
# How long a stopped or cancelled run goes on counting how its running jobs finish.
SETTLING = timedelta(days=1)


def advance_runs(store: QueueStore, now: datetime | None = None) -> float | None:
    """One check of every live run; the seconds until one wants the next (None: none)."""
    now = now or timezone.now()
    waits = []
    # A run stopped or cancelled still counts how the jobs it resumed finish, for a while.
    looked_at = ResumeRun.objects.filter(
        Q(state__in=(ResumeRun.RUNNING, ResumeRun.PAUSED))
        | Q(state__in=(ResumeRun.STOPPED, ResumeRun.CANCELLED), updated__gte=now - SETTLING)
    )
    for pk in looked_at.values_list("pk", flat=True):
        try:
            wait = _advance_alone(pk, now)
        except Exception:
            log.exception("resume run %s not advanced; trying again at the next tick", pk)
            wait = POLL_SECONDS
        if wait is not None:
            waits.append(wait)
    return min(waits) if waits else None


def _advance_alone(pk: int, now: datetime) -> float | None:
    """Advance the run under its row's lock: a second dispatcher sharing the database skips
    it meanwhile, never sends its slice too. (SQLite has one writer at a time anyway.)"""
    skip = connection.features.has_select_for_update_skip_locked
    with transaction.atomic():
        rows = ResumeRun.objects.select_for_update(skip_locked=skip).filter(pk=pk)
        run = rows.first()
        return None if run is None else advance(run, now)


def advance(run: ResumeRun, now: datetime) -> float | None:
    settle(run)
    if run.state != ResumeRun.RUNNING:
        return POLL_SECONDS if run.items.filter(state=I.RESUMED).exists() else None
    p = progress(run)
    if why := stop_reason(run, p):
        stop(run, why)
        return None
    budget = _budget(run, p.resumed, now)
    if budget:
        send(run, _next_items(run, budget))
        p = progress(run)
    if not p.left and not p.resumed:
        end(run, ResumeRun.FINISHED, "")
        return None
    if run.mode == ResumeRun.PER_MINUTE and p.left and run.next_at is not None:
        return max((run.next_at - now).total_seconds(), 1.0)
    return POLL_SECONDS


# --- the pace ---------------------------------------------------------------------------


def _budget(run: ResumeRun, in_flight: int, now: datetime) -> int:
    """How many jobs the run may resume now; per minute, moves its ``next_at`` on."""
    most = max(int(settings.MQ_RESUME_SLICE), 1)
    if run.mode == ResumeRun.IN_FLIGHT:
        return max(min(run.rate - in_flight, most), 0)
    spacing = 60.0 / run.rate
    due = run.next_at or now
    # After a pause or a dispatcher down for a while: never more than a minute's worth at once.
    due = max(due, now - timedelta(seconds=60 - spacing))
    if now < due:
        return 0
    budget = min(1 + math.floor((now - due).total_seconds() / spacing), run.rate, most)
    run.next_at = due + timedelta(seconds=budget * spacing)
    run.save(update_fields=["next_at", "updated"])
    return budget


def _next_items(run: ResumeRun, budget: int) -> list[ResumeRunItem]:
    """Those a process stopped mid-slice left ``sending`` first, then the next waiting."""
    sending = list(run.items.filter(state=I.SENDING).order_by("position")[:budget])
    more = budget - len(sending)
    waiting = list(run.items.filter(state=I.WAITING).order_by("position")[:more]) if more else []
    return sending + waiting


# --- a slice ----------------------------------------------------------------------------


def send(run: ResumeRun, items: list[ResumeRunItem]) -> None:
    """Resume ``items``: quarantined jobs are skipped, the others resumed at the version
    shown; each item's result is read back from its audit row."""
    record = run.action
    I.objects.filter(pk__in=[i.pk for i in items]).update(state=I.SENDING)
    audited = _audited(record, [i.jid for i in items])
    todo = [i for i in items if i.jid not in audited]
    poisoned = quarantine.of([i.jid for i in todo])
    if poisoned:
        record_skipped(record, [(i.jid, poisoned[i.jid].words) for i in todo if i.jid in poisoned])
    chunk = [(i.jid, i.version) for i in todo if i.jid not in poisoned]
    if chunk:
        run_slice(record, chunk)
    audited = _audited(record, [i.jid for i in items])
    for item in items:
        result, after, detail = audited.get(item.jid, ("failed", None, "no audit row"))
        item.state = {"done": I.RESUMED, "skipped": I.SKIPPED}.get(result, I.NOT_RESUMED)
        item.after_version = after
        item.message = "" if result == "done" else detail
    I.objects.bulk_update(items, ["state", "after_version", "message"])


def _audited(record: AdminAction, jids: list[str]) -> dict[str, tuple]:
    rows = record.items.filter(part_of="", item_id__in=jids)
    return {
        i: (r, v, d)
        for i, r, v, d in rows.values_list("item_id", "result", "after_version", "detail")
    }


# --- settling ---------------------------------------------------------------------------


def settle(run: ResumeRun) -> None:
    """The resumed jobs that finished since, as the mirror shows them."""
    last = 0
    while True:
        items = list(run.items.filter(state=I.RESUMED, pk__gt=last).order_by("pk")[:CHUNK])
        if not items:
            return
        last = items[-1].pk
        rows = Job.objects.filter(jid__in=[i.jid for i in items]).values_list(
            "jid", "status", "status_version", "message"
        )
        now = {jid: (status, version, message) for jid, status, version, message in rows}
        changed = []
        for item in items:
            status, version, message = now.get(item.jid, ("", -1, ""))
            if status == JobStatus.COMPLETED:
                item.state = I.COMPLETED
            elif status == JobStatus.DELETED:
                item.state = I.DELETED
            elif status == JobStatus.FAILED and version > (item.after_version or -1):
                item.state, item.cause, item.message = I.FAILED_AGAIN, cause_of(message), message
            else:
                continue
            changed.append(item)
        I.objects.bulk_update(changed, ["state", "cause", "message"])


# --- the end ----------------------------------------------------------------------------


def stop(run: ResumeRun, why: str) -> None:
    """The run's own stop: said on its page, and in the audit trail by ``RUN_ACTOR``."""
    end(run, ResumeRun.STOPPED, why)
    AdminAction.objects.create(
        username=RUN_ACTOR,
        action="run.stopped",
        scope="job",
        reason=why,
        params={"run": run.pk},
        token=f"run-{run.pk}-stopped",
        total=1,
        done=1,
        finished=timezone.now(),
    )
    log.warning("resume run %s %s", run.pk, why)


def end(run: ResumeRun, state: str, why: str) -> None:
    """The run ends: its admin action is finished, the jobs never taken stay as they are."""
    with transaction.atomic():
        run.state, run.why = state, why
        run.save(update_fields=["state", "why", "updated"])
        AdminAction.objects.filter(pk=run.action_id, finished__isnull=True).update(
            finished=timezone.now()
        )
