"""Object pages: the list and one object's versions. Read-only; they read the inventory.

Both show only objects of the collections the person may read (``ui.reading_scope``); an
object of another collection answers the same 404 as an ARK the inventory does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from inventory.filters import ObjectFilter
from inventory.models import InventoryFile, InventoryObject, InventoryVersion, LocalIdentifier
from inventory.tables import ObjectTable, object_rows
from jobs.models import Job
from ui.links import job_link
from ui.listing import collection_names, filtered_table
from ui.reading_scope import in_readable, may_read

# A version's files listed on the page; the rest are counted, not read.
MAX_FILES = 1000


@login_required
def object_list(request):
    filterset, table = filtered_table(
        request, ObjectFilter, in_readable(request.user, object_rows()), ObjectTable
    )
    return render(
        request,
        "inventory/object_list.html",
        {"filter": filterset, "table": table, "collections": collection_names(request.user)},
    )


@dataclass(frozen=True)
class VersionView:
    row: InventoryVersion
    files: list[InventoryFile]
    more: int  # files not listed
    job_gone: bool = False  # its job was purged from the queue (its page says by what, when)

    @property
    def known(self) -> bool:
        """Whether the version was recorded with what it changed (older ones were not)."""
        return bool(self.row.mode)

    @property
    def job(self):
        return job_link(self.row.job_id)


def version_views(obj: InventoryObject) -> list[VersionView]:
    """The object's versions, newest first, each with its first MAX_FILES files by name."""
    rows = list(obj.versions.order_by("-number"))
    jids = [r.job_id for r in rows if r.job_id]
    live = Job.objects.filter(jid__in=jids, removed_at__isnull=True)
    present = set(live.values_list("jid", flat=True))
    views = []
    for row in rows:
        files = list(row.files.order_by("name")[:MAX_FILES])
        gone = bool(row.job_id) and row.job_id not in present
        views.append(VersionView(row, files, max(0, row.file_count - len(files)), gone))
    return views


@login_required
def object_detail(request, ark: str):
    obj = InventoryObject.objects.filter(ark=ark).first()
    if obj is None or not may_read(request.user, obj.collection):
        return render(request, "inventory/object_missing.html", {"ark": ark}, status=404)
    context = {
        "obj": obj,
        "local_ids": LocalIdentifier.objects.filter(ark=ark).order_by("collection", "local_id"),
        "versions": version_views(obj),
        "max_files": MAX_FILES,
    }
    return render(request, "inventory/object_detail.html", context)
