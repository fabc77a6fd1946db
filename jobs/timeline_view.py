"""What a job's or a batch's timeline shows: its rows in status-version order, the time
spent in each state, the versions nobody saw, who made each change and the admin action
behind it. Two queries per item (its events, the admin items matching them); the
templates only display what is built here.

Rows are ordered by status version, never by time: the rows' times come from different
clocks (a worker's, the mirror's), and equal seconds are common.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from batches.models import BatchEvent
from jobs.models import JobEvent
from merritt_queue.core import history
from merritt_queue.core.states import BATCH, JOB
from mirror.timeline import own_message
from steering.actions.catalog import ACTIONS
from steering.models import AdminActionItem
from ui.links import detail_url

INEXACT_NOTE = (
    "Seen by the mirror, not told by its writer: the previous state and who made it "
    "may not be exact."
)


@dataclass(frozen=True)
class Who:
    text: str
    kind: str  # admin | worker | dispatcher | command | mirror | other-writer | "" (as spelled)
    title: str = ""


def who_of(actor: str) -> Who:
    """The person, process or command behind ``actor`` (merritt_queue.core.history's spellings)."""
    if actor.startswith(history.ADMIN_PREFIX):
        name = actor[len(history.ADMIN_PREFIX) :]
        return Who(name, "admin", f"an admin action by {name}")
    if actor.startswith(history.SUBMISSION_PREFIX):
        name = actor[len(history.SUBMISSION_PREFIX) :]
        return Who(name, "submitter", f"submitted by {name}")
    if actor.startswith(history.WORKER_PREFIX):
        return _process("worker", actor[len(history.WORKER_PREFIX) :])
    if actor.startswith(history.DISPATCHER_PREFIX):
        return _process("dispatcher", actor[len(history.DISPATCHER_PREFIX) :])
    if actor in (history.CLEANUP, history.REPAIR):
        return Who(actor, "command", "a management command")
    if actor == history.MIRROR_WATCH:
        return Who(
            "seen by the mirror (writer unknown)",
            "mirror",
            "the mirror saw this change while following the tree; who made it was not recorded",
        )
    if actor == history.MIRROR_RECONCILE:
        return Who(
            "found by a full reconcile (writer unknown)",
            "mirror",
            "a full reconcile found this state; who made it was not recorded",
        )
    if actor == history.OTHER_WRITER:
        return Who(actor, "other-writer", "no process of this queue: another writer of the tree")
    return Who(actor or "—", "")


def _process(kind: str, process: str) -> Who:
    """``worker on host-a``: a librarian asks which machine; the process id is in the title
    for whoever reads the host's logs."""
    host, _, pid = process.rpartition(":")
    if not host or not pid.isdigit():
        return Who(f"{kind} {process}", kind, f"the {kind} process {process}")
    return Who(f"{kind} on {host}", kind, f"the {kind} on {host}, process id {pid}")


# A job's priority written again in the same state (store.jobmoves: "priority 5 -> 6").
PRIORITY_CHANGE = re.compile(r"priority \d+ -> \d+")


@dataclass(frozen=True)
class AdminNote:
    """The admin action that produced a row's status version."""

    label: str
    username: str
    reason: str
    url: str
    result: str


@dataclass(frozen=True)
class Row:
    version: int
    at: datetime | None
    from_status: str
    to_status: str
    retry_count: int | None  # None for a batch
    who: Who
    message: str
    exact: bool
    change: str = ""  # set when the change cannot read "from -> to"
    before: str = ""  # a line shown above the row (changes not observed)
    after: str = ""  # below the last row: versions the item has that no row tells yet
    duration: timedelta | None = None
    duration_text: str = ""
    duration_title: str = ""
    admin: list[AdminNote] = field(default_factory=list)

    @property
    def routine(self) -> bool:
        """A priority change in the same state, by no admin action: hidden unless asked for."""
        return (
            self.from_status == self.to_status
            and not self.change
            and not self.admin
            and bool(PRIORITY_CHANGE.fullmatch(self.message))
        )


@dataclass(frozen=True)
class Timeline:
    rows: list[Row]
    retries: bool  # a job's timeline has a retry count column, a batch's none
    inexact_note: str = INEXACT_NOTE

    @property
    def routine_count(self) -> int:
        return sum(r.routine for r in self.rows)

    @property
    def columns(self) -> int:
        return 6 if self.retries else 5


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def duration_text(d: timedelta) -> str:
    """Short, two units at most: 45 s, 3 min 20 s, 2 h 5 min, 3 d 4 h."""
    s = int(d.total_seconds())
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m} min {s} s" if s else f"{m} min"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h} h {m} min" if m else f"{h} h"
    days, h = divmod(h, 24)
    return f"{days} d {h} h" if h else f"{days} d"


def _change_and_gap(event, previous_version: int | None) -> tuple[str, str]:
    """``(change, before)``: the change cell when "from -> to" would invent a state, and
    the line above the row when versions before it were not observed."""
    to = event.to_status
    v = event.status_version
    if previous_version is None:
        if v <= 0:
            return "", ""
        if not event.from_status:
            return f"earlier changes not recorded; now {to}", ""
        return "", f"Changes before status version {v} were not recorded."
    missed = v - previous_version - 1
    if not event.from_status:
        if missed > 0:
            return f"{plural(missed + 1, 'change')} not observed; now {to}", ""
        return "", ""
    if missed > 0:
        return "", f"{plural(missed, 'change')} not observed"
    return "", ""


def build_rows(
    events: Iterable,
    *,
    finished: bool,
    now: datetime,
    admin: dict[int, list[AdminNote]] | None = None,
    retries: bool = True,
    current: tuple[int, str] | None = None,
) -> list[Row]:
    """The rows of a timeline from events sorted by status version (JobEvent/BatchEvent).

    Time in a state runs until the next row; "so far" for the last while the item is not
    finished; "at most" when changes between the two were not observed. ``current`` is
    the item's (status version, status) as mirrored: versions past the last row are told.
    """
    events = list(events)
    admin = admin or {}
    rows: list[Row] = []
    previous = None
    for i, e in enumerate(events):
        change, before = _change_and_gap(e, previous)
        previous = e.status_version
        following = events[i + 1] if i + 1 < len(events) else None
        after = ""
        if following is None and current and current[0] > e.status_version:
            after = f"{plural(current[0] - e.status_version, 'later change')} not recorded "
            after += f"yet; now {current[1]}"
        # No "so far" for a state the item has left since.
        duration, text, title = _time_in_state(e, following, finished or bool(after), now)
        rows.append(
            Row(
                version=e.status_version,
                at=e.at,
                from_status=e.from_status,
                to_status=e.to_status,
                retry_count=e.retry_count if retries else None,
                who=who_of(e.actor),
                message=own_message(e.message, e.to_status) if change else e.message,
                exact=e.exact,
                change=change,
                before=before,
                after=after,
                duration=duration,
                duration_text=text,
                duration_title=title,
                admin=admin.get(e.status_version, []),
            )
        )
    return rows


def _time_in_state(event, following, finished: bool, now: datetime):
    if following is None:
        if finished or event.at is None:
            return None, "", ""
        d = now - event.at
        if d < timedelta(0):
            return None, "", ""
        return d, f"{duration_text(d)} so far", "still in this state"
    if event.at is None or following.at is None:
        return None, "", ""
    d = following.at - event.at
    if d < timedelta(0):  # two writers' clocks disagree: no duration rather than a false one
        return None, "?", "the next change's time is earlier than this one's (clocks differ)"
    if following.status_version - event.status_version > 1:
        return d, f"≤ {duration_text(d)}", "at most: changes in between were not observed"
    return d, duration_text(d), ""


def admin_notes(item_id: str, versions: list[int]) -> dict[int, list[AdminNote]]:
    """The admin actions that produced these status versions of the item: one query."""
    if not versions:
        return {}
    items = (
        AdminActionItem.objects.filter(item_id=item_id, after_version__in=versions)
        .select_related("admin_action")
        .only(
            "after_version",
            "result",
            "admin_action__id",
            "admin_action__action",
            "admin_action__username",
            "admin_action__reason",
        )
        .order_by("id")
    )
    notes: dict[int, list[AdminNote]] = {}
    for item in items:
        record = item.admin_action
        action = ACTIONS.get(record.action)
        label = f"{action.label} ({action.scope})" if action else record.action
        assert item.after_version is not None
        notes.setdefault(item.after_version, []).append(
            AdminNote(
                label=label,
                username=record.username,
                reason=record.reason,
                url=detail_url("steering:result", str(record.pk)),
                result=item.result,
            )
        )
    return notes


def job_timeline(job, now: datetime | None = None) -> Timeline:
    events = JobEvent.objects.filter(jid=job.jid)
    return _timeline(events, job.jid, JOB.is_terminal(job.status), job, now, retries=True)


def batch_timeline(batch, now: datetime | None = None) -> Timeline:
    events = BatchEvent.objects.filter(bid=batch.bid)
    return _timeline(events, batch.bid, BATCH.is_terminal(batch.status), batch, now, retries=False)


def _timeline(events, item_id: str, finished: bool, item, now, *, retries: bool) -> Timeline:
    rows = list(events.order_by("status_version"))
    built = build_rows(
        rows,
        finished=finished,
        now=now or timezone.now(),
        admin=admin_notes(item_id, [e.status_version for e in rows]),
        retries=retries,
        current=(item.status_version, item.status),
    )
    return Timeline(built, retries=retries)
