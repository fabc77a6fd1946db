"""The base of every list table: server-side sort, pages read by key, one shared template."""

from __future__ import annotations

import django_tables2 as tables
from django.db.models import QuerySet

from ui.keyed import KeyedQuerysetData

DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 500


class PageTable(tables.Table):
    """Sorted and paginated on the server; ``?per_page=`` is honoured up to MAX_PER_PAGE.

    A queryset is wrapped in KeyedQuerysetData, so that any paginator reads a page's keys
    before its rows. Cells come from the columns' ``render_<name>`` methods or the plain
    value, escaped by format_html; ``ui/table.html`` gives each cell the class
    ``c-<column>`` that the style sheet sizes.
    """

    def __init__(self, data, *args, **kwargs):
        if isinstance(data, QuerySet):
            data = KeyedQuerysetData(data)
        super().__init__(data, *args, **kwargs)

    def paginate(self, *args, per_page=None, **kwargs):
        per_page = max(1, min(per_page or DEFAULT_PER_PAGE, MAX_PER_PAGE))
        return super().paginate(*args, per_page=per_page, **kwargs)

    class Meta:
        attrs = {"class": "mq-table"}
        template_name = "ui/table.html"
        per_page = DEFAULT_PER_PAGE
        order_by_field = "sort"
        page_field = "page"
