"""The items a confirmation names: ``?ids=`` or ``?all=1`` with the list's filter, read from
the mirror (a worker, from the tree)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

from django.db.models import QuerySet
from django.http import QueryDict

from batches.filters import BatchFilter
from batches.models import Batch
from jobs.filters import JobFilter
from jobs.models import Job
from merritt_queue.core.approval import shown_status
from merritt_queue.core.errors import QueueError
from merritt_queue.project.runtime import get_store
from steering.actions import accessqueue, breakerswitch, wholefilter, workerdrain
from steering.actions.kinds import Action, Scope, Target
from steering.actions.planning import profile_collections

MAX_ITEMS = 10_000  # "all matching" beyond this must be narrowed first (unless summarised)
SAMPLE = 50  # jobs a summarised selection's page lists (each row costs its rendering)
NOT_FILTER = {"all", "ids", "page", "sort", "per_page", "action", "mode", "next"}


# --- the selection ---------------------------------------------------------------------


@dataclass
class Selection:
    targets: list[Target]
    missing: list[str]  # ids asked for but not in the mirror
    total: int
    everything: bool  # "all N matching this filter"
    query: str  # the filter, as a query string, when everything
    too_many: bool = False
    error: str = ""
    # Too many to list (``wholefilter``): ``targets`` is a sample, ``rows`` the whole selection.
    rows: QuerySet | None = None

    @property
    def summarized(self) -> bool:
        return self.rows is not None

    @property
    def readable(self) -> str:
        """The filter as a librarian reads it: ``status=Failed · signature=digest mismatch…``,
        not percent-encoded."""
        return " · ".join(f"{key}={value}" for key, value in parse_qsl(self.query))


def _ids(request) -> list[str]:
    raw = ",".join(request.GET.getlist("ids"))
    seen: dict[str, None] = {}
    for part in raw.split(","):
        if part.strip():
            seen.setdefault(part.strip(), None)
    return list(seen)


def _filter_query(request) -> str:
    q = QueryDict(mutable=True)
    for key in request.GET:
        if key not in NOT_FILTER:
            q.setlist(key, request.GET.getlist(key))
    return q.urlencode()


MIRROR = {
    Scope.JOB: (Job, "jid", JobFilter),
    Scope.BATCH: (Batch, "bid", BatchFilter),
}


def select(request, action: Action) -> Selection:
    """The items the request names: ``?ids=`` or ``?all=1`` with the list's filter."""
    if action.scope == Scope.QUEUE:
        return Selection([Target("ingest")], [], 1, False, "")
    if action.scope == Scope.COLLECTION:
        ids = _ids(request)
        return Selection([Target(m) for m in ids], [], len(ids), False, "")
    if action.scope == Scope.WORKER:
        return _live(_ids(request), workerdrain.read_worker)
    if action.scope == Scope.DEPENDENCY:
        return _live(_ids(request), breakerswitch.read_dependency)
    if action.scope == Scope.ACCESS_QUEUE:
        store = get_store(init=False)
        return _live(_ids(request), lambda name: accessqueue.read_queue(store, name))
    if action.scope == Scope.ACCESS:
        return _access(request)
    model, key, filter_class = MIRROR[action.scope]
    fields: tuple[str, ...] = (
        key,
        "status",
        "status_version",
        "collection",
        "locked",
        "profile",
        "removed_at",
    )
    if model is Batch:
        fields += ("approval",)
    collections = profile_collections()
    if request.GET.get("all") == "1":
        query = _filter_query(request)
        filterset = filter_class(QueryDict(query), queryset=model._default_manager.all())
        if not filterset.is_valid():
            return Selection([], [], 0, True, query, error="the list's filter is not valid")
        rows = filterset.qs.order_by(f"-{key}").values_list(*fields)
        total = rows.count()
        if model is Job and wholefilter.summarizes(action, total, query):
            sample = [_target(r, collections) for r in rows[:SAMPLE]]
            return Selection(sample, [], total, True, query, rows=filterset.qs)
        if total > MAX_ITEMS:
            return Selection([], [], total, True, query, too_many=True)
        targets = [_target(r, collections) for r in rows]
        return Selection(targets, [], total, True, query)
    ids = _ids(request)
    found = {
        r[0]: _target(r, collections)
        for r in model._default_manager.filter(**{f"{key}__in": ids}).values_list(*fields)
    }
    missing = [i for i in ids if i not in found]
    return Selection([found[i] for i in ids if i in found], missing, len(ids), False, "")


def _access(request) -> Selection:
    """Access requests, named or those the access list's filter finds in the mirror, as
    they stand in ZooKeeper now: a handful, each read in one round."""
    from accessui.filters import matching_keys

    everything = request.GET.get("all") == "1"
    query = _filter_query(request) if everything else ""
    if everything:
        keys, error = matching_keys(QueryDict(query), MAX_ITEMS)
        if error:
            return Selection([], [], 0, True, query, error=error)
        if keys is None:
            return Selection([], [], MAX_ITEMS + 1, True, query, too_many=True)
    else:
        keys = _ids(request)
    targets, missing = accessqueue.read_requests(get_store(init=False), keys)
    return Selection(targets, missing, len(keys), everything, query)


def _live(names: list[str], read) -> Selection:
    """The workers or breakers named, as they stand now (``read``: from Redis or ZooKeeper;
    neither is a row of the mirror)."""
    targets, missing = [], []
    for name in names:
        try:
            item = read(name)
        except QueueError:
            missing.append(name)
            continue
        targets.append(Target(name, item.status))
    return Selection(targets, missing, len(names), False, "")


def _target(row, collections: dict[str, str]) -> Target:
    """An item of the mirror; one Merritt wrote names only its profile, whose collection
    it belongs to (for scoping and the page's collection column)."""
    jid, status, version, collection, locked, profile, removed_at, *approval = row
    collection = collection or collections.get(profile, "")
    if approval:  # a batch's: one awaiting approval is judged as its own state
        status = shown_status(status, approval[0])
    return Target(jid, status, version, collection, locked, removed_at)
