"""The object list: one row per object, its counts read from the object's own row."""

from __future__ import annotations

from urllib.parse import quote

import django_tables2 as tables
from django.utils.functional import cached_property
from django.utils.html import format_html

from inventory.models import InventoryObject, LocalIdentifier
from ui.cells import truncated, when
from ui.links import detail_url
from ui.tables import PageTable

OBJECT_LIST_FIELDS = ("ark", "collection", "title", "version_count", "last_stored")


def object_url(ark: str) -> str:
    """The object page of ``ark``; its slashes stay path separators, anything else is quoted."""
    return detail_url("inventory:detail", quote(ark, safe=":/"))


def object_link(ark: str | None):
    if not ark:
        return "—"
    return format_html('<a href="{}">{}</a>', object_url(ark), ark)


def object_rows():
    """Newest stored first; id breaks ties so that pages never overlap."""
    return InventoryObject.objects.only(*OBJECT_LIST_FIELDS).order_by("-last_stored", "-id")


def local_ids_of(arks) -> dict[str, list[str]]:
    """The local ids bound to each of these ARKs, in one query."""
    found: dict[str, list[str]] = {}
    rows = LocalIdentifier.objects.filter(ark__in=list(arks)).order_by("local_id")
    for ark, local_id in rows.values_list("ark", "local_id"):
        found.setdefault(ark, []).append(local_id)
    return found


class ObjectTable(PageTable):
    ark = tables.Column("ARK", order_by=("ark",))
    title = tables.Column("Title", orderable=False)
    collection = tables.Column("Collection", order_by=("collection", "last_stored", "id"))
    local_ids = tables.Column("Local ids", accessor="ark", orderable=False, empty_values=())
    version_count = tables.Column("Versions", order_by=("version_count", "id"))
    last_stored = tables.Column("Last stored", order_by=("last_stored", "id"))

    class Meta(PageTable.Meta):
        attrs = {"class": "mq-table cards objects"}
        order_by = "-last_stored"
        empty_text = "No objects match."

    @cached_property
    def page_local_ids(self) -> dict[str, list[str]]:
        """The page's local ids, in one query rather than one per row."""
        return local_ids_of(row.record.ark for row in self.paginated_rows)

    def render_ark(self, value):
        return object_link(value)

    def render_title(self, value):
        return truncated(value)

    def render_local_ids(self, record):
        return ", ".join(self.page_local_ids.get(record.ark, ())) or "—"

    def render_last_stored(self, value):
        return when(value)
