"""What the dashboard pages read from the mirror: a fixed number of aggregate queries each.

Nothing here talks to ZooKeeper. Every function issues one query (or a fixed
number), whatever the number of jobs, so a page's query count stays constant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlencode

from django.core.cache import cache
from django.db.models import Count, Q, QuerySet
from django.db.models.fields.json import KT
from django.utils import timezone

from batches.models import Batch, Collection
from jobs.models import Job, MirrorState
from merritt_queue.core.errors import InvalidTransition
from merritt_queue.core.states import JOB, JOB_STEPS, BatchStatus, JobStatus, resume_target
from ui.cells import age_text

# The other app's list pages; filters are passed as query strings.
JOBS_URL = "/jobs/"
BATCHES_URL = "/batches/"
# The per-collection counts take 50-70 ms at 100,000 jobs on SQLite (no index fits them), so
# they are kept in Django's cache (local memory by default) for a few seconds (the Throughput
# panel's likewise: dashboard.throughput).
COLLECTION_COUNTS_CACHE_SECONDS = 10
# Locked jobs listed on /locks/; more are counted, not listed.
RUNNING_SHOWN = 500


def jobs_url(**params: str) -> str:
    return f"{JOBS_URL}?{urlencode(params)}"


def batches_url(**params: str) -> str:
    return f"{BATCHES_URL}?{urlencode(params)}"


# Completed and Deleted rows are the bulk of a long-lived mirror and nobody acts on their
# number: counting them reads most of the table, so that count is kept this long. Every
# other status is counted on each request, over the status index.
SETTLED_COUNTS_CACHE_SECONDS = 60
SETTLED = ("Completed", "Deleted")


def status_counts(model) -> dict[str, int]:
    """Rows per status: the settled statuses (and any unknown one) kept
    SETTLED_COUNTS_CACHE_SECONDS, the others counted on each request.

    Both are counted from an index alone (``COUNT(*)``, which needs no column of the row:
    PostgreSQL then answers from the index without visiting the table): the settled ones
    from the status index, the others from the partial index of rows still in the queue.
    """
    moving = [c for c, _ in model._meta.get_field("status").choices if c not in SETTLED]
    key = f"dashboard:status-counts:{model._meta.label_lower}"
    settled = cache.get(key)
    if settled is None:
        rows = model.objects.exclude(status__in=moving).order_by().values_list("status")
        settled = {status: n for status, n in rows.annotate(n=Count("*")) if n}
        cache.set(key, settled, SETTLED_COUNTS_CACHE_SECONDS)
    # A row removed from the queue in a moving status (Merritt's own tools purged it) is
    # history, not work waiting: the unfinished counts leave it out, the settled keep it.
    now = model.objects.filter(status__in=moving, removed_at__isnull=True)
    counts = dict(settled)
    counts.update(now.order_by().values_list("status").annotate(n=Count("*")))
    return counts


# The steps a job can fail in: the job list's ``failed_at`` filter takes these.
FAILABLE = (JobStatus.PENDING, *JOB_STEPS)


def failed_step(last_successful: str) -> str:
    """The step a failed job failed in: the one it resumes at, after its last successful one."""
    try:
        return resume_target(last_successful or None)
    except InvalidTransition:  # a terminal last status: bad data, shown as it is
        return f"after {last_successful}"


@dataclass
class FailedAt:
    step: str
    count: int
    last_successful: list[str] = field(default_factory=list)

    @property
    def href(self) -> str:
        if self.step in FAILABLE:
            return jobs_url(status=JobStatus.FAILED, failed_at=self.step)
        return jobs_url(status=JobStatus.FAILED)


def failures_by_step() -> list[FailedAt]:
    """Failed jobs per step that failed, in the machine's order: one GROUP BY."""
    rows = (
        Job.objects.filter(status=JobStatus.FAILED)
        .order_by()
        .values_list("last_successful_status")
        .annotate(n=Count("*"))  # from the (status, last_successful_status) index alone
    )
    steps: dict[str, FailedAt] = {}
    for last, n in rows:
        step = failed_step(last or "")
        item = steps.setdefault(step, FailedAt(step, 0))
        item.count += n
        item.last_successful.append(last or "none")
    order = {s: i for i, s in enumerate(JOB.statuses)}
    return sorted(steps.values(), key=lambda f: (order.get(f.step, len(order)), f.step))


def held_collections(rows: QuerySet | None = None) -> list[Collection]:
    """The held collections of ``rows`` (those a person may read), by default all."""
    rows = Collection.objects.all() if rows is None else rows
    return list(rows.filter(held=True).order_by("mnemonic"))


@dataclass
class MirrorSummary:
    """The small facts the dashboard shows from MirrorState, without loading big JSON."""

    locks_at: datetime | None = None
    queue_paused: bool | None = None
    check_at: datetime | None = None
    check_total: int | None = None
    check_unrepaired: int | None = None


def _as_bool(text: str | None) -> bool | None:
    if text is None:
        return None
    return str(text).lower() in ("true", "1")


def mirror_summary() -> MirrorSummary:
    """One query; JSON keys are read in SQL so a long lock or findings list is not loaded."""
    out = MirrorSummary()
    rows = MirrorState.objects.filter(name__in=["locks", "consistency"]).values(
        "name",
        "at",
        paused=KT("detail__paused"),
        queue_paused=KT("detail__queue_paused"),
        total=KT("detail__total"),
        unrepaired=KT("detail__unrepaired"),
    )
    for row in rows:
        if row["name"] == "locks":
            paused = row["paused"] if row["paused"] is not None else row["queue_paused"]
            out.locks_at, out.queue_paused = row["at"], _as_bool(paused)
        else:
            out.check_at = row["at"]
            out.check_total = int(row["total"] or 0)
            out.check_unrepaired = int(row["unrepaired"] or 0)
    return out


# --- collections ------------------------------------------------------------------


@dataclass
class CollectionRow:
    mnemonic: str
    hold: Collection | None = None
    counts: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    held_batches: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def href(self) -> str:
        return jobs_url(collection=self.mnemonic)

    @property
    def batches_href(self) -> str:
        return batches_url(collection=self.mnemonic)

    @property
    def held_batches_href(self) -> str:
        return batches_url(collection=self.mnemonic, status=BatchStatus.HELD)

    def cells(self) -> list[tuple[str, int, str]]:
        """(status, count, link) for every job status, in the machine's order."""
        return [
            (s, self.counts.get(s, 0), jobs_url(collection=self.mnemonic, status=s))
            for s in JOB.statuses
        ]


def _jobs_per_collection_and_status() -> list[tuple[str, str, int]]:
    """One GROUP BY collection, status (a full scan: cached COLLECTION_COUNTS_CACHE_SECONDS)."""
    key = "dashboard:jobs-per-collection"
    rows = cache.get(key)
    if rows is None:
        rows = list(
            Job.objects.order_by().values_list("collection", "status").annotate(n=Count("id"))
        )
        cache.set(key, rows, COLLECTION_COUNTS_CACHE_SECONDS)
    return rows


def collection_rows() -> list[CollectionRow]:
    """Every collection known to the mirror: Collection rows plus any job's or batch's value.

    Three queries: the collections, jobs GROUP BY (collection, status), batches (and the
    Held ones) GROUP BY collection.
    """
    rows: dict[str, CollectionRow] = {}
    for c in Collection.objects.all():
        rows[c.mnemonic] = CollectionRow(c.mnemonic, hold=c)
    for mnemonic, status, n in _jobs_per_collection_and_status():
        rows.setdefault(mnemonic, CollectionRow(mnemonic)).counts[status] = n
    held = Count("id", filter=Q(status=BatchStatus.HELD, removed_at__isnull=True))
    batches = Batch.objects.order_by().values_list("collection").annotate(n=Count("id"), held=held)
    for mnemonic, n, n_held in batches:
        row = rows.setdefault(mnemonic, CollectionRow(mnemonic))
        row.batches, row.held_batches = n, n_held
    held_first = sorted(rows.values(), key=lambda r: r.mnemonic)
    return sorted(held_first, key=lambda r: not (r.hold and r.hold.held))


# --- locks ------------------------------------------------------------------------

# The lock directories of zk-tree.md, in the order the page shows them.
LOCK_KINDS = {
    "queue": "Queue pause",
    "collections": "Collection holds",
    "storage": "Storage locks",
    "inventory": "Inventory locks",
    "localid": "Local-id locks",
}
# Item locks (/jobs/JID/lock, /batches/BID/lock): shown with what is running, not as a group.
ITEM_KINDS = ("job", "batch")
KIND_ALIASES = {
    "collection": "collections",
    "local_id": "localid",
    "local-id": "localid",
    "jobs": "job",
    "batches": "batch",
}


def age(since: datetime | None, now: datetime) -> str:
    """A short age, "45 s", "12 min", "3 h 5 min", "2 d 4 h" (cheaper than timesince)."""
    return "—" if since is None else age_text(now - since)


def stamp(when: datetime | None) -> str:
    """A time in the site's time zone as ``2026-11-21 14:15:25``, or a dash."""
    return timezone.localtime(when).strftime("%Y-%m-%d %H:%M:%S %Z") if when else "—"


@dataclass
class Lock:
    path: str
    kind: str
    name: str
    created: datetime | None
    owner: str  # the ephemeral owner's session id, for ephemeral locks
    data: str  # what the lock node holds (a storage lock: the job id that took it)
    age: str = ""
    created_text: str = ""


def _lock_kind(path: str, kind: str | None) -> str:
    """The lock's group: a LOCK_KINDS key, ``job`` or ``batch`` (from the path if need be)."""
    kind = str(kind or "").lower()
    kind = KIND_ALIASES.get(kind, kind)
    if kind in LOCK_KINDS or kind in ITEM_KINDS:
        return kind
    parts = path.strip("/").split("/")
    if len(parts) == 3 and parts[0] == "locks":
        return KIND_ALIASES.get(parts[1], parts[1])
    if len(parts) == 3 and parts[2] == "lock":
        return KIND_ALIASES.get(parts[0], parts[0])
    return kind or "other"


def _when(value) -> datetime | None:
    """A time as the reconciler stored it: ISO text, or milliseconds since the epoch."""
    if value in (None, ""):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, tz=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)


def _oldest_first(lock: Lock) -> tuple:
    """Old locks first: a lock held too long is what this page is read for."""
    return (lock.created is None, lock.created or datetime.max.replace(tzinfo=UTC), lock.path)


@dataclass
class LockState:
    read_at: datetime | None
    queue_paused: bool | None
    paused_at: datetime | None = None
    groups: list[tuple[str, str, list[Lock]]] = field(default_factory=list)
    # When each job's or batch's own lock was taken, by id.
    item_locked_at: dict[str, datetime | None] = field(default_factory=dict)


def lock_state() -> LockState:
    """The queue pause and every lock, as the reconciler last stored them (one query).

    Reads ``MirrorState("locks").detail`` as ``mirror.locks_detail`` writes it:
    ``{"paused", "paused_at", "read_at", "locks": [{"path", "kind", "name", "ctime",
    "owner", "data"}]}`` (``queue_paused`` is accepted for ``paused``).
    """
    state = MirrorState.objects.filter(name="locks").first()
    if state is None:
        return LockState(None, None)
    detail = state.detail or {}
    paused = detail.get("paused", detail.get("queue_paused"))
    out = LockState(state.at, paused, _when(detail.get("paused_at")))
    now = timezone.now()
    grouped: dict[str, list[Lock]] = {k: [] for k in LOCK_KINDS}
    for item in detail.get("locks") or []:
        path = str(item.get("path", ""))
        kind = _lock_kind(path, item.get("kind"))
        name = str(item.get("name") or path.rstrip("/").rsplit("/", 1)[-1])
        if kind in ITEM_KINDS:
            name = str(item.get("name") or path.strip("/").split("/")[1])
            out.item_locked_at[name] = _when(item.get("ctime"))
            continue
        created = _when(item.get("ctime"))
        owner, data = str(item.get("owner") or ""), str(item.get("data") or "")
        lock = Lock(path, kind, name, created, owner, data, age(created, now), stamp(created))
        grouped.setdefault(kind, []).append(lock)
    out.groups = [
        (kind, LOCK_KINDS.get(kind, f"Other locks ({kind})"), sorted(ls, key=_oldest_first))
        for kind, ls in grouped.items()
    ]
    return out


def running_jobs(
    limit: int = RUNNING_SHOWN, rows: QuerySet | None = None
) -> tuple[list[Job], bool]:
    """Jobs whose mirror row is locked (a worker held them when read), sorted oldest first.

    Returns at most ``limit`` of them and whether there are more, read from the partial
    index of locked jobs (``job_locked``). ``rows``: the jobs a person may read, by default all.
    """
    jobs = list(
        (Job.objects.all() if rows is None else rows)
        .filter(locked=True)
        .order_by("last_modified")
        .only("jid", "batch", "collection", "status", "last_modified")[: limit + 1]
    )
    jobs.sort(key=lambda j: (j.last_modified is None, j.last_modified, j.jid))
    return jobs[:limit], len(jobs) > limit


def running_batches(rows: QuerySet | None = None) -> list[Batch]:
    """Locked batches of ``rows`` (those a person may read), by default all."""
    return list(
        (Batch.objects.all() if rows is None else rows)
        .filter(locked=True)
        .only("bid", "collection", "status", "last_modified")
        .order_by("last_modified")
    )


# --- consistency ------------------------------------------------------------------


def last_check() -> MirrorState | None:
    """The findings ``manage.py check_tree`` saved on its last run, or None if it never ran."""
    return MirrorState.objects.filter(name="consistency").first()
