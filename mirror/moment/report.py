"""A moment, or two, as plain data: what the API answers and the command prints as JSON."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone

from jobs.models import LockSpan

from . import diff, holds, locks, states, when, windows
from .scope import Scope

LOCKS_NOTE = (
    "locks are those the mirror's reads of the lock nodes saw, since this version first ran: "
    "when each was taken is exact (its node's creation); when it was released is known "
    "only to lie between the last read that found it and the first that did not"
)
HOLDS_NOTE = (
    "holds and pauses are those this site's audit records, and those still on now, from "
    "when their node was made; one another tool (Merritt's admin) set and lifted since "
    "is not known, nor an access queue's pause it set"
)


def utc(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _counts(c: states.Counts) -> dict:
    return {
        "by_state": dict(sorted(c.by_state.items())),
        "by_collection": {k: dict(sorted(v.items())) for k, v in sorted(c.by_collection.items())},
        "uncertain": c.uncertain,
    }


def _hold(h: holds.Hold | None) -> dict | None:
    if h is None:
        return None
    return {
        "target": h.target,
        "by": h.by,
        "reason": h.reason,
        "since": utc(h.since),
        "action": h.action_id,
    }


def _window(w) -> dict:
    return {
        "id": w.pk,
        "target": w.target,
        "reason": w.reason,
        "start": utc(w.occurrence.start),
        "end": utc(w.occurrence.end),
    }


def _lock(s: LockSpan) -> dict:
    return {
        "path": s.path,
        "kind": s.kind,
        "name": s.name,
        "owner": s.owner,
        "taken_at": utc(s.taken_at),
        "last_seen_at": utc(s.last_seen_at),
        "gone_seen_at": utc(s.gone_seen_at),
    }


def moment(at: datetime, scope: Scope) -> dict:
    missing = when.missing(at, scope)
    return {
        "at": utc(at),
        "time_zone": timezone.get_current_timezone_name(),
        "jobs": _counts(states.counts(at, "job", scope)),
        "batches": _counts(states.counts(at, "batch", scope)),
        "pause": _hold(holds.pause_at(at)),
        "access_pauses": {q: _hold(h) for q, h in holds.access_pauses_at(at).items()},
        "holds": [_hold(h) for h in holds.holds_at(at, scope)],
        "windows": [_window(w) for w in windows.windows_at(at, scope)],
        "locks": {
            "recorded": True,
            "note": LOCKS_NOTE,
            "held": [_lock(s) for s in locks.held_at(at, scope)],
        },
        "notes": [HOLDS_NOTE],
        "missing": {"jobs": missing.jobs, "batches": missing.batches, "text": missing.text},
    }


def items(at: datetime, kind: str, state: str, scope: Scope, page: int) -> dict:
    found = states.items(at, kind, state, scope, page=page)
    key = states.KINDS[kind][2]
    return {
        "at": utc(at),
        "kind": kind,
        "state": state,
        "page": found.number,
        "more": found.more,
        "items": [{key: i.id, "collection": i.collection, "now": i.now} for i in found.rows],
    }


def _moved(d: diff.Diff, key: str) -> dict:
    return {
        "at_from": dict(sorted(d.counts_a.by_state.items())),
        "at_to": dict(sorted(d.counts_b.by_state.items())),
        "changed": {
            "total": d.changed.total,
            "page": d.changed.number,
            "more": d.changed.more,
            "items": [
                {key: m.id, "collection": m.collection, "path": m.path} for m in d.changed.rows
            ],
        },
    }


def between(a: datetime, b: datetime, scope: Scope, page: int = 1) -> dict:
    jobs = diff.between(a, b, "job", scope, page)
    batches = diff.between(a, b, "batch", scope, page)
    missing = when.missing(a, scope)
    taken, released = locks.turned(a, b, scope)
    return {
        "from": utc(a),
        "to": utc(b),
        "time_zone": timezone.get_current_timezone_name(),
        "jobs": _moved(jobs, "jid"),
        "batches": _moved(batches, "bid"),
        "holds": [
            {
                "target": c.target,
                "began": c.began,
                "by": c.by,
                "reason": c.reason,
                "at": utc(c.at),
                "action": c.action_id,
            }
            for c in jobs.holds
        ],
        "windows": [
            {
                "id": c.window.pk,
                "target": c.window.target,
                "began": c.began,
                "at": utc(c.at),
                "reason": c.window.reason,
            }
            for c in jobs.windows
        ],
        "locks": {
            "recorded": True,
            "note": LOCKS_NOTE,
            "taken": [_lock(s) for s in taken],
            "released": [_lock(s) for s in released],
        },
        "notes": [HOLDS_NOTE],
        "missing": {"jobs": missing.jobs, "batches": missing.batches, "text": missing.text},
    }
