"""What removed a job or batch that is gone from the queue, told on its page's 404 instead of
a bare "not found", and on the pages that link to it (an object's versions).

Read from what outlives the item: the audit rows a purge leaves (``cleanup`` from the
Maintenance page or the command, ``batch.purge`` by hand; a job goes with its batch, found
through its history rows), and the last status its history recorded. A dry run removed
nothing and is never taken for a removal. Only a reader of every collection is told of an
item the audit names no collection for; anyone else gets the bare 404, as for an item they
may not read (``ui.reading_scope``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.http import Http404
from django.shortcuts import render

from batches.models import BatchEvent
from jobs.models import JobEvent
from steering.models import AdminAction, AdminActionItem
from ui.reading_scope import may_read, reads_everything

# The purges, as the audit list words them (steering.actions.wording).
PURGES = {"cleanup": "Clean up", "batch.purge": "Purge now (batch)"}


@dataclass(frozen=True)
class Removal:
    kind: str  # "job" or "batch"
    item_id: str
    bid: str  # a job's batch, when its history names one
    record: AdminAction | None  # the purge that removed it, if this site's audit has it
    last_status: str
    last_seen: datetime | None

    @property
    def how(self) -> str:
        return PURGES.get(self.record.action, self.record.action) if self.record else ""

    @property
    def with_batch(self) -> bool:
        """Whether the job went with its batch (the audit row is the batch's)."""
        return self.record is not None and self.kind == "job" and self.bid != self.item_id


def _history(kind: str, item_id: str):
    if kind == "job":
        return JobEvent.objects.filter(jid=item_id).order_by("-status_version").first()
    return BatchEvent.objects.filter(bid=item_id).order_by("-status_version").first()


def _purge_row(ids: list[str]) -> AdminActionItem | None:
    rows = AdminActionItem.objects.filter(
        item_id__in=ids, result="done", admin_action__action__in=list(PURGES)
    ).select_related("admin_action")
    # A dry run is told apart in Python: a JSON key's absence reads differently per database.
    real = (r for r in rows.order_by("-admin_action__started") if not _dry(r.admin_action))
    return next(real, None)


def _dry(record: AdminAction) -> bool:
    return bool((record.params or {}).get("dry_run"))


def removal_of(user, kind: str, item_id: str) -> Removal | None:
    """What is known of the removal of ``item_id``, or None: nothing is, or ``user`` may not
    be told (the item's collection is not theirs, or is not known)."""
    last = _history(kind, item_id)
    bid = item_id if kind == "batch" else (getattr(last, "bid", "") or "")
    row = _purge_row([i for i in (item_id, bid) if i])
    if last is None and row is None:
        return None
    if not reads_everything(user) and not (
        row and row.collection and may_read(user, row.collection)
    ):
        return None
    return _removal(kind, item_id, bid, row, last)


def removal_of_row(kind: str, item_id: str, bid: str) -> Removal:
    """What removed an item whose mirror row is kept, marked removed: the page's reader may
    read the row, so may be told (``bid``: a job's batch, from its row)."""
    row = _purge_row([i for i in (item_id, bid) if i])
    return _removal(kind, item_id, bid, row, _history(kind, item_id))


def _removal(kind: str, item_id: str, bid: str, row, last) -> Removal:
    return Removal(
        kind=kind,
        item_id=item_id,
        bid=bid,
        record=row.admin_action if row else None,
        last_status=last.to_status if last else "",
        last_seen=last.at if last else None,
    )


def removed_page(request, kind: str, item_id: str):
    """The 404 of a removed item, saying what removed it and when; the bare 404 otherwise."""
    removal = removal_of(request.user, kind, item_id)
    if removal is None:
        raise Http404("No such item.")
    return render(request, "ui/removed.html", {"removal": removal}, status=404)
