"""An "all matching" selection too large to list (more than ``MQ_BULK_LIST_MAX`` jobs): the
confirmation page summarises it from the mirror (how many the action applies to, counts by
collection and status, a sample) and signs the filter and the moment it was shown, never each
job and version; the run reads the filter's jobs again, a chunk at a time (``Stream``).

The stale-version guard without shipping the versions: the mirror moves a job row's
``read_at`` whenever it writes the row. A row not written since the page was shown still holds
the version the page counted, and the job is acted on at that version (ZooKeeper's multi checks
it: a change the mirror has not seen yet is caught there). A row written since is skipped and
said, as an item whose version changed is. A job the page counted that no longer matches the
filter when the run reaches it is not read again: the run counts them and says how many
(``LEFT_KEY``). Times are the web process's and the mirror writers' clocks, one site's hosts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.http import QueryDict
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs.filters import JobFilter
from jobs.models import Job
from merritt_queue.core.states import JobStatus
from steering.actions.kinds import Action, Scope
from steering.actions.planning import profile_collections
from steering.actions.resumesteps import common_steps, resume_offer
from steering.models import AdminAction
from ui import quarantine

# The keys of a summarised action's params (beside the resume's ``step``).
AS_OF_KEY, COUNTED_KEY, AFTER_KEY, LEFT_KEY = "as_of", "counted", "after", "no_longer_matching"
BY_SHOWN = 50  # collection and status pairs the page counts, largest first


# Filters judged at the moment (why a job waits, whether it stalled or is quarantined): a job
# enters them with no row written, so the run's guard (a row written since the page) cannot
# tell it from one the page counted. Their selections are listed, each job at its version.
MOMENTARY = ("waiting", "stalled", "quarantined")


def summarizes(action: Action, total: int, query: str) -> bool:
    """Whether an "all matching" selection of ``total`` jobs is summarised, not listed: a
    pipelined job move (hold, release, resume, delete), on more jobs than a page lists, by a
    filter on what the rows say."""
    asked = QueryDict(query)
    return (
        action.scope == Scope.JOB
        and action.batched
        and not action.form
        and total > int(settings.MQ_BULK_LIST_MAX)
        and not any(asked.get(name) for name in MOMENTARY)
    )


def matching(query: str) -> QuerySet | None:
    """The mirror's jobs the list's filter (a query string) matches; None if it is not valid."""
    filterset = JobFilter(QueryDict(query), queryset=Job.objects.all())
    return filterset.qs if filterset.is_valid() else None


def applying(action: Action, rows: QuerySet, scope: set[str] | None) -> QuerySet:
    """Those of ``rows`` ``action.check`` passes, judged in the database: status, lock and
    the person's collections (a row Merritt wrote names only its profile)."""
    rows = rows.filter(status__in=action.applies_to, removed_at__isnull=True)
    if not action.locked_ok:
        rows = rows.filter(locked=False)
    rows = in_scope(rows, scope)
    if action.name == "job.resume":
        rows = rows.exclude(last_successful_status__in=_unresumable(rows))
    return rows


def in_scope(rows: QuerySet, scope: set[str] | None) -> QuerySet:
    """Those of ``rows`` of the person's collections (a row Merritt wrote names only its
    profile)."""
    if scope is None:
        return rows
    profiles = [p for p, c in profile_collections().items() if c in scope]
    return rows.filter(Q(collection__in=scope) | Q(collection="", profile__in=profiles))


def _unresumable(rows: QuerySet) -> list[str]:
    """The last successful steps from which the queue refuses a resume (few distinct values,
    each asked once of the run's own check)."""
    lasts = rows.order_by().values_list("last_successful_status", flat=True).distinct()
    return [last for last in lasts if not resume_offer(_Failed("", JobStatus.FAILED, last or None))]


@dataclass(frozen=True)
class _Failed:
    jid: str
    status: str
    last_successful_status: str | None


@dataclass(frozen=True)
class Summary:
    applying: int
    by: list[tuple[str, str, int]]  # (collection, status, jobs) of the whole selection
    more_pairs: int  # pairs beyond those counted on the page
    as_of: datetime
    steps: list[dict]  # a resume: the steps every applying job may restart at


def summarize(action: Action, rows: QuerySet, scope: set[str] | None) -> Summary:
    """The page's counts from one aggregate over the selection, grouped by the columns
    ``applying`` judges (few distinct values; ``Job``'s summary index covers them, so the
    database reads no row)."""
    as_of = timezone.now()
    # Rows removed from the queue are history: nothing to act on, left out of the counts.
    groups = list(
        rows.filter(removed_at__isnull=True)
        .order_by()
        .values_list("status", "collection", "locked", "last_successful_status", "profile")
        .annotate(n=Count("id"))
    )
    of_profile = profile_collections() if scope is not None else {}
    lasts = {g[3] for g in groups if g[0] in action.applies_to}
    offers = {last: resume_offer(_Failed("", JobStatus.FAILED, last or None)) for last in lasts}
    pairs: dict[tuple[str, str], int] = {}
    ok, offered = 0, []
    for status, collection, locked, last, profile, n in groups:
        pairs[(collection, status)] = pairs.get((collection, status), 0) + n
        if status not in action.applies_to or (locked and not action.locked_ok):
            continue
        if scope is not None and (collection or of_profile.get(profile, "")) not in scope:
            continue
        if action.name == "job.resume":
            if not offers[last]:
                continue
            offered.append(offers[last])
        ok += n
    by = sorted(((c, st, n) for (c, st), n in pairs.items()), key=lambda x: (-x[2], x[0], x[1]))
    return Summary(
        applying=ok,
        by=by[:BY_SHOWN],
        more_pairs=max(len(by) - BY_SHOWN, 0),
        as_of=as_of,
        steps=common_steps(offered) if action.name == "job.resume" else [],
    )


def params(summary: Summary) -> dict:
    """What the record keeps to read the selection again at run time."""
    return {AS_OF_KEY: summary.as_of.isoformat(), COUNTED_KEY: summary.applying}


def filtered(record: AdminAction) -> bool:
    return AS_OF_KEY in (record.params or {})


class Stream:
    """The jobs of a summarised action, read again from the mirror a chunk at a time, in jid
    order from where the run got to (``AFTER_KEY``, kept after each chunk): each chunk's
    jobs to act on at their version, and those whose row changed since the page, with why."""

    def __init__(self, record: AdminAction, action: Action, scope: set[str] | None) -> None:
        self.record = record
        self.resumes = action.name == "job.resume"
        self.as_of = parse_datetime(record.params[AS_OF_KEY])
        rows = matching(record.selection)
        self.rows = None if rows is None else applying(action, rows, scope)

    def __iter__(self) -> Iterator[tuple[list[tuple[str, int]], list[tuple[str, str]]]]:
        if self.rows is None:  # the filter no longer reads (a field gone): nothing to act on
            return
        size = max(int(settings.MQ_BULK_CHUNK), 1)
        while True:
            after = self.record.params.get(AFTER_KEY, "")
            page = list(
                self.rows.filter(jid__gt=after)
                .order_by("jid")
                .values_list("jid", "status", "status_version", "read_at")[:size]
            )
            if not page:
                return
            ids = [row[0] for row in page]
            # A run started again after its worker died: the jobs it audited stay as they are.
            audited = set(
                self.record.items.filter(part_of="", item_id__in=ids).values_list(
                    "item_id", flat=True
                )
            )
            # A resume leaves a quarantined job out, as the listed page and a paced run do.
            poisoned = quarantine.of([jid for jid in ids if jid not in audited])
            act, stale = [], []
            for jid, status, version, read_at in page:
                if jid in audited:
                    continue
                if self.as_of is not None and read_at > self.as_of:
                    stale.append((jid, _changed(status, version, read_at)))
                elif self.resumes and jid in poisoned:
                    stale.append((jid, poisoned[jid].words))
                else:
                    act.append((jid, version))
            yield act, stale
            self.record.params = {**self.record.params, AFTER_KEY: page[-1][0]}
            self.record.save(update_fields=["params"])

    def finish(self) -> None:
        """Say how many the page counted that the run did not meet (they left the filter or
        stopped applying since): the total becomes the items audited."""
        audited = self.record.done + self.record.skipped + self.record.failed
        counted = int(self.record.params.get(COUNTED_KEY, 0))
        self.record.params = {**self.record.params, LEFT_KEY: max(counted - audited, 0)}
        self.record.total = audited
        self.record.save(update_fields=["params", "total"])


def _changed(status: str, version: int, read_at: datetime) -> str:
    return (
        "changed since the page was shown: the mirror wrote it again at "
        f"{read_at.isoformat(timespec='seconds')}; it is now {status} (version {version})"
    )
