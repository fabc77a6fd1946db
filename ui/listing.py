"""A list page's parts: its filtered, sorted, paginated table and the links beside it."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.urls import reverse
from django_tables2 import RequestConfig
from django_tables2.paginators import LazyPaginator

from batches.models import Collection
from ui.reading_scope import in_readable


class UncountedPaginator(LazyPaginator):
    """django-tables2's LazyPaginator, saying so: a page that reads ``paginator.lazy`` (the
    count above the table, the action bar's "every matching item") offers no total."""

    lazy = True


def filtered_table(request, filter_class, queryset, table_class, order_by=None):
    """Filter (from the query string), sort and paginate; invalid filters show no rows.

    ``order_by`` replaces the table's default order when the query string has no ``sort``.
    A filter that reads every row (its ``scans`` set, as by a title search) gets pages
    without a count: counting would read them all a second time.
    """
    filterset = filter_class(request.GET, queryset=queryset)
    # Ignoring a bad value would quietly show unfiltered rows; show none, and the error.
    rows = filterset.qs if filterset.is_valid() else queryset.none()
    table = table_class(rows, order_by=order_by)
    paginator = UncountedPaginator if getattr(filterset, "scans", False) else Paginator
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
