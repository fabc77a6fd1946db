"""The base of every list table: server-side sort, pages read by key, one shared template."""

from __future__ import annotations

import django_tables2 as tables
from django.db.models import QuerySet
from django.utils.html import format_html, format_html_join
from django_tables2.utils import signature

from ui.keyed import KeyedQuerysetData

DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 500


class PageTable(tables.Table):
    """Sorted and paginated on the server; ``?per_page=`` is honoured up to MAX_PER_PAGE.

    A queryset is wrapped in KeyedQuerysetData, so that the stock paginators read a page's
    keys before its rows. Cells come from the columns' ``render_<name>`` methods or the
    plain value, escaped by format_html. ``page_rows`` renders them in one pass per row
    rather than through django-tables2's ``BoundRow``, which inspects each render method's
    signature and resolves each accessor again for every cell: measured on the job list,
    that costs several times the one pass, and more than the page's queries.
    """

    def __init__(self, data, *args, **kwargs):
        if isinstance(data, QuerySet):
            data = KeyedQuerysetData(data)
        super().__init__(data, *args, **kwargs)

    def paginate(self, *args, per_page=None, **kwargs):
        per_page = max(1, min(per_page or DEFAULT_PER_PAGE, MAX_PER_PAGE))
        return super().paginate(*args, per_page=per_page, **kwargs)

    def page_rows(self):
        """The current page as ``<tr>`` HTML, one escaped string per row.

        Accessors are plain attribute names; a ``render_<name>`` method takes ``value``
        and/or ``record``, and is not called for an empty value unless it takes ``record``.
        """
        plan = []
        for column in self.columns:
            render = getattr(self, f"render_{column.name}", None)
            wants = signature(render)[0] if render else ()
            empty = column.column.empty_values
            plan.append((column.name, str(column.accessor), render, wants, column.default, empty))
        # A phone shows each row as a card of labelled lines (static/mq.css), so each cell
        # carries its column's header.
        heads = [(p[0], str(column.header)) for p, column in zip(plan, self.columns, strict=True)]
        for row in self.paginated_rows:
            record = row.record
            cells = []
            for _, accessor, render, wants, default, empty in plan:
                value = getattr(record, accessor, None)
                if value in empty and "record" not in wants:
                    cells.append(default)
                elif render is None:
                    cells.append(value)
                else:
                    args = {"value": value, "record": record}
                    cells.append(render(**{name: args[name] for name in wants}))
            yield format_html(
                "<tr>{}</tr>",
                format_html_join(
                    "",
                    '<td class="c-{}" data-label="{}">{}</td>',
                    ((name, head, cell) for (name, head), cell in zip(heads, cells, strict=True)),
                ),
            )

    def get_column_class_names(self, classes_set, bound_column):
        """The ``c-<column>`` class on each header too, as on each cell: CSS drops a column
        by it at narrower widths."""
        classes = super().get_column_class_names(classes_set, bound_column)
        return {*classes, f"c-{bound_column.name}"}

    class Meta:
        attrs = {"class": "mq-table cards"}
        template_name = "ui/table.html"
        per_page = DEFAULT_PER_PAGE
        order_by_field = "sort"
        page_field = "page"
