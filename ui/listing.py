"""A list page's parts: its filtered, sorted, paginated table and the links beside it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.urls import reverse
from django.utils.functional import cached_property
from django_tables2 import RequestConfig
from django_tables2.paginators import LazyPaginator

from batches.models import Collection
from ui.reading_scope import in_readable


class UncountedPaginator(LazyPaginator):
    """django-tables2's LazyPaginator, saying so: a page that reads ``paginator.lazy`` (the
    count above the table, the action bar's "every matching item") offers no total."""

    lazy = True


class CappedPaginator(Paginator):
    """Counts at most ``cap`` rows: a list of a million jobs is not read to the end for its
    total. Past the cap it says so (``capped``) and pages through the first ``cap`` rows;
    a filter or another sort reaches the others."""

    cap = 25_000
    capped = False

    @cached_property
    def count(self) -> int:
        rows: Any = self.object_list  # a table's BoundRows, over its KeyedQuerysetData
        while not hasattr(rows, "query") and hasattr(rows, "data"):
            rows = rows.data
        if not hasattr(rows, "query"):
            return super().count
        # Only the keys: the rows' computed columns (a JSON key each) are not worked out.
        found = rows.order_by().values_list("pk")[: self.cap + 1].count()
        self.capped = found > self.cap
        return min(found, self.cap)


def filtered_table(request, filter_class, queryset, table_class, order_by=None):
    """Filter (from the query string), sort and paginate; invalid filters show no rows.

    ``order_by`` replaces the table's default order when the query string has no ``sort``.
    A filter that reads every row (its ``scans`` set, as by a title search) gets pages
    without a count: counting would read them all a second time. Any other list counts
    up to CappedPaginator's cap.
    """
    filterset = filter_class(request.GET, queryset=queryset)
    # Ignoring a bad value would quietly show unfiltered rows; show none, and the error.
    rows = filterset.qs if filterset.is_valid() else queryset.none()
    table = table_class(rows, order_by=order_by)
    paginator = UncountedPaginator if getattr(filterset, "scans", False) else CappedPaginator
    RequestConfig(request, paginate={"paginator_class": paginator}).configure(table)
    return filterset, table


def collection_names(user) -> list[str]:
    """Known collections ``user`` may read, offered as suggestions in the collection filter."""
    rows = in_readable(user, Collection.objects.all(), "mnemonic")
    return list(rows.values_list("mnemonic", flat=True))


def record_links(request, **names) -> dict:
    """The whole record's export links, narrowed as the list is (``names``: the export's
    filter for each list filter)."""
    query = {
        export: request.GET[mine].strip()
        for mine, export in names.items()
        if request.GET.get(mine, "").strip()
    }
    suffix = f"?{urlencode(query)}" if query else ""
    links: dict = {fmt: reverse(f"jobs:export-{fmt}") + suffix for fmt in ("csv", "json")}
    return links | {"narrowed": bool(query)}
