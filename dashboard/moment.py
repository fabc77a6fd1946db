"""The queue at a moment (``/moment/?at=&diff=``): the counts, holds, pauses and windows
as they stood at a chosen time, each count a link to its items, or two moments compared
(``mirror.moment``). Read from the mirror's record only, within the person's reading scope:
a depositor sees their collections' items and holds, and the queue's own pause and windows.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone

from merritt_queue.core.states import BATCH, JOB
from mirror.moment import diff, holds, locks, report, states, when, windows
from mirror.moment.scope import of_user

MACHINES = {"job": JOB.statuses, "batch": BATCH.statuses}
PICKER = "%Y-%m-%dT%H:%M:%S"


def picker(value) -> str:
    """A time as the page's picker shows it: the site's zone, no offset (a datetime-local
    field takes none)."""
    return timezone.localtime(value).strftime(PICKER) if value else ""


def link_time(value) -> str:
    """A time as the page's links carry it: the site's zone with its offset, so that a link
    into the hour clocks repeat when they go back opens that hour, not the one before."""
    return timezone.localtime(value).isoformat(timespec="seconds")


def _page_number(text: str | None) -> int:
    return int(text) if text and text.isdigit() and 0 < int(text) < 10**6 else 1


def _rows(kind: str, *moments: tuple[datetime, states.Counts]) -> list[dict]:
    """One row per state, in the machine's order (states it does not know after): its
    count at each moment given, each a link to those items then."""
    known = MACHINES[kind]
    seen = set().union(*(c.by_state for _, c in moments))
    order = [s for s in known if s in seen] + sorted(seen - set(known))
    rows = []
    for state in order:
        cells = []
        for at, counts in moments:
            query = urlencode({"at": link_time(at), "kind": kind, "state": state})
            cells.append({"value": counts.by_state.get(state, 0), "href": f"/moment/?{query}"})
        rows.append({"state": state, "cells": cells})
    return rows


@login_required
def moment(request):
    scope = of_user(request.user)
    given, later = request.GET.get("at", ""), request.GET.get("diff", "")
    context: dict = {
        "time_zone": timezone.get_current_timezone_name(),
        "at_text": given,
        "diff_text": later,
        "locks_note": report.LOCKS_NOTE,
        "holds_note": report.HOLDS_NOTE,
        "scoped": not scope.everything,
        "history_start": None,
        "suggest": "",
    }
    if not given:
        context["history_start"] = when.history_start()
        context["suggest"] = picker(timezone.now().replace(microsecond=0))
        return render(request, "dashboard/moment.html", context)
    try:
        at = when.parse(given)
        b = when.parse(later) if later else None
        when.check(at) if b is None else when.check_pair(at, b)
    except when.Refused as e:
        context["refusal"] = str(e)
        context["history_start"] = when.history_start()
        return render(request, "dashboard/moment.html", context, status=400)
    page = _page_number(request.GET.get("page"))
    context |= {
        "at": at,
        "at_text": picker(at),
        "at_link": link_time(at),
        "missing": when.missing(at, scope),
    }
    if b is not None:
        compared = diff.between(at, b, "job", scope, page)
        taken, released = locks.turned(at, b, scope)
        context |= {
            "locks_taken": taken,
            "locks_released": released,
            "b": b,
            "diff_text": picker(b),
            "diff": compared,
            "batch_diff": diff.moved(at, b, "batch", scope),
            "job_rows": _rows("job", (at, compared.counts_a), (b, compared.counts_b)),
            "batch_rows": _rows(
                "batch",
                (at, states.counts(at, "batch", scope)),
                (b, states.counts(b, "batch", scope)),
            ),
            "next": urlencode({"at": link_time(at), "diff": link_time(b), "page": page + 1}),
            "previous": urlencode({"at": link_time(at), "diff": link_time(b), "page": page - 1}),
        }
        return render(request, "dashboard/moment.html", context)
    kind, state = request.GET.get("kind", ""), request.GET.get("state", "")
    if kind in states.KINDS and state:
        collection = request.GET.get("collection", "")
        found = states.items(at, kind, state, scope, collection=collection, page=page)
        base = {"at": link_time(at), "kind": kind, "state": state} | (
            {"collection": collection} if collection else {}
        )
        context |= {
            "kind": kind,
            "state": state,
            "collection": collection,
            "items": found,
            "next": urlencode(base | {"page": page + 1}),
            "previous": urlencode(base | {"page": page - 1}),
        }
        return render(request, "dashboard/moment.html", context)
    jobs, batches = states.counts(at, "job", scope), states.counts(at, "batch", scope)
    link = {"at": link_time(at)}
    context |= {
        "jobs": jobs,
        "batches": batches,
        "job_rows": _rows("job", (at, jobs)),
        "batch_rows": _rows("batch", (at, batches)),
        "collections": _by_collection(jobs, link),
        "pause": holds.pause_at(at),
        "access_pauses": holds.access_pauses_at(at),
        "holds": holds.holds_at(at, scope),
        "windows": windows.windows_at(at, scope),
        "locks": locks.held_at(at, scope),
    }
    return render(request, "dashboard/moment.html", context)


def _by_collection(jobs: states.Counts, link: dict) -> list[dict]:
    """Jobs per collection and state, each count a link to its items (Merritt's rows that
    name only a profile are counted under none, and not listed apart)."""
    rows = []
    for collection in sorted(jobs.by_collection):
        counts = jobs.by_collection[collection]
        cells = [
            {
                "state": s,
                "count": n,
                "href": "/moment/?"
                + urlencode(link | {"kind": "job", "state": s, "collection": collection})
                if collection
                else "",
            }
            for s in [
                *(s for s in JOB.statuses if s in counts),
                *sorted(set(counts) - set(JOB.statuses)),
            ]
            if (n := counts[s])
        ]
        rows.append({"collection": collection or "(profile only)", "cells": cells})
    return rows
