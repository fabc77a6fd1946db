"""What a deletion request lists: read from the mirror when it is asked (kept on the request,
so the approver sees what the requester saw) and compared with the mirror again when it is
shown to the approver (an item written since will be skipped, not deleted)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from batches.models import Batch
from jobs.models import Job
from merritt_queue.core.states import JobStatus
from steering.actions import wholefilter
from steering.actions.catalog import ACTIONS
from steering.actions.kinds import Action, Scope
from steering.actions.planning import profile_collections
from steering.models import AdminAction, DeletionRequest
from ui.reading_scope import readable_collections

J = JobStatus
LISTED_CLEANUP = 500  # a cleanup's dry-run rows the request keeps to show


def listed(action: Action, items: list[list]) -> dict:
    """Each item of ``items`` ([id, version]) as the mirror has it now: status, collection,
    size and, for a batch, its jobs and which of them go with it."""
    ids = [i for i, _ in items]
    of_profile = profile_collections()
    if action.scope == Scope.JOB:
        rows = Job.objects.filter(jid__in=ids).values_list(
            "jid", "status", "collection", "profile", "space_needed", "local_id", "batch_id"
        )
        found: dict[str, dict[str, Any]] = {
            jid: {
                "status": status,
                "collection": collection or of_profile.get(profile, ""),
                "size": size,
                "local_id": local_id,
                "batch": bid or "",
            }
            for jid, status, collection, profile, size, local_id, bid in rows
        }
    else:
        found = {
            bid: {"status": status, "collection": c or of_profile.get(p, ""), "jobs": []}
            for bid, status, c, p in Batch.objects.filter(bid__in=ids).values_list(
                "bid", "status", "collection", "profile"
            )
        }
        jobs = Job.objects.filter(batch_id__in=ids, removed_at__isnull=True).order_by("jid")
        for bid, jid, status, size in jobs.values_list("batch_id", "jid", "status", "space_needed"):
            goes = action.name == "batch.purge" or status in (J.FAILED, J.HELD)
            found[str(bid)]["jobs"].append([jid, status, goes, size])
        for row in found.values():
            row["size"] = sum(j[3] for j in row["jobs"] if j[2])
    shown = [
        {"id": i, "version": v, **found.get(i, {"status": "?", "collection": ""})} for i, v in items
    ]
    return {"rows": shown}


def filtered(action: Action, selection: str, scope) -> dict:
    """An "all matching" request: the filter, and its counts by collection and status of the
    jobs within the requester's ``scope`` only (those the run may delete), each row's
    collection its own or, for a row Merritt wrote, its profile's."""
    rows = wholefilter.matching(selection)
    if rows is None:
        return {"by": [], "filter": selection}
    groups = (
        wholefilter.in_scope(rows.filter(removed_at__isnull=True), scope)
        .order_by()
        .values_list("collection", "profile", "status")
        .annotate(n=Count("id"))
    )
    of_profile = profile_collections()
    pairs: dict[tuple[str, str], int] = {}
    for collection, profile, status, n in groups:
        key = (collection or of_profile.get(profile, ""), status)
        pairs[key] = pairs.get(key, 0) + n
    by = sorted(pairs.items(), key=lambda pair: (-pair[1], pair[0]))
    return {"by": [[c, st, n] for (c, st), n in by], "filter": selection}


def cleanup(dry: AdminAction) -> dict:
    """A cleanup's request: the dry run it showed, what it counted, and its first rows."""
    report = dry.report or {}
    rows = dry.items.order_by("id").values_list("item_id", "before_status", "detail")
    return {
        "dry_run": dry.pk,
        "counts": report.get("counts", {}),
        "cutoff": report.get("cutoff", ""),
        "rows": [list(r) for r in rows[:LISTED_CLEANUP]],
        "more": max(dry.items.count() - LISTED_CLEANUP, 0),
    }


def collections(shown: dict, action: Action) -> list[str]:
    """The collections a request deletes from, which its approver must act on."""
    return sorted(c for c in _named(shown, action) if c)


def names_unknown(req: DeletionRequest) -> bool:
    """Whether some of ``req``'s items name no collection known here (nor does their
    profile): no approver limited to some collections can be said to cover them."""
    return "" in _named(req.shown or {}, ACTIONS[req.action])


def _named(shown: dict, action: Action) -> set[str]:
    if "by" in shown:
        return {c for c, status, _ in shown["by"] if status in action.applies_to}
    return {row.get("collection", "") for row in shown.get("rows", []) if "id" in row}


def now(req: DeletionRequest) -> list[dict]:
    """The request's rows with what the mirror says now: ``changed`` when an item was
    written since it was asked (approving skips it)."""
    if req.action == "cleanup":  # its rows are the dry run's, shown as they are
        return []
    rows = (req.shown or {}).get("rows", [])
    if not req.items:
        return rows
    model, key = (Job, "jid") if req.kind == "jobs" else (Batch, "bid")
    ids = [row["id"] for row in rows]
    current = dict(
        model._default_manager.filter(**{f"{key}__in": ids}).values_list(key, "status_version")
    )
    states = dict(model._default_manager.filter(**{f"{key}__in": ids}).values_list(key, "status"))
    out = []
    for row in rows:
        version = current.get(row["id"])
        changed = version is None or (row["version"] is not None and version != row["version"])
        out.append({**row, "changed": changed, "now": states.get(row["id"], "gone")})
    return out


def readable(user, req: DeletionRequest) -> bool:
    """Whether ``user`` reads every collection ``req`` deletes from (a cleanup's: all; a
    request naming none, whose rows' collections are unknown: all too)."""
    allowed = readable_collections(user)
    if allowed is None:
        return True
    named = set(req.collections)
    return req.action != "cleanup" and bool(named) and named <= allowed
