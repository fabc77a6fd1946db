"""The job list and job history tables; every cell is escaped (format_html or plain text)."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

import django_tables2 as tables
from django.core.paginator import EmptyPage, Page, Paginator
from django.db.models import QuerySet
from django.template.defaultfilters import filesizeformat
from django.urls import get_script_prefix, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django_tables2.paginators import LazyPaginator
from django_tables2.rows import BoundRows
from django_tables2.utils import signature

from jobs.models import Job
from merritt_queue.core.tree import is_batch_id, is_job_id

DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 500
TRUNCATE = 80


def when(value: datetime | None) -> str:
    """A timestamp in the site's time zone, to the second."""
    if value is None:
        return "—"
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")


def status_badge(value: str):
    return format_html('<span class="st st-{}">{}</span>', (value or "none").lower(), value or "—")


def truncated(value: str, length: int = TRUNCATE):
    """The start of a long text, the whole of it in the ``title`` tooltip."""
    if not value or len(value) <= length:
        return value or ""
    short = value[: length - 1].rstrip() + "…"
    return format_html('<span class="truncated" title="{}">{}</span>', value, short)


@lru_cache(maxsize=16)
def _detail_url(name: str, script_prefix: str) -> tuple[str, str]:
    """The detail URL of ``name`` around its id, reversed once (reverse() is slow per row)."""
    url = reverse(name, args=["0"])
    head, _, tail = url.rpartition("0")
    return head, tail


def detail_url(name: str, item_id: str) -> str:
    head, tail = _detail_url(name, get_script_prefix())
    return f"{head}{item_id}{tail}"


def job_link(jid: str | None):
    """A link to the job, or its id as text when it is not a well-formed job id."""
    if not jid:
        return "—"
    if not is_job_id(jid):
        return jid
    return format_html('<a href="{}">{}</a>', detail_url("jobs:detail", jid), jid)


def batch_link(bid: str | None):
    if not bid:
        return "—"
    if not is_batch_id(bid):
        return bid
    return format_html('<a href="{}">{}</a>', detail_url("batches:detail", bid), bid)


def _page_records(rows, keys: list) -> BoundRows:
    """The rows of these primary keys, in the keys' order, for the table to render.

    Only the keys select them: repeating the filters would let the database pick a
    filter's index over the 50 primary keys.
    """
    queryset = rows.data.data
    by_key = queryset.model._base_manager.filter(pk__in=keys)
    names, defer = queryset.query.deferred_loading
    if names:
        by_key = by_key.defer(*names) if defer else by_key.only(*names)
    position = {key: i for i, key in enumerate(keys)}
    records = sorted(by_key, key=lambda r: position[r.pk])
    return BoundRows(records, table=rows.table)


def _ordered_queryset(rows) -> QuerySet | None:
    queryset = getattr(rows.data, "data", None)  # django-tables2 BoundRows over a queryset
    return queryset if isinstance(queryset, QuerySet) else None


class KeyPaginator(Paginator):
    """Pages a django-tables2 queryset in two steps: the page's keys, then those rows.

    Skipping the rows before a deep page, or sorting on a column with no index, then
    moves only keys and sort values, never whole rows with their titles and messages.
    A count, the keys, the rows: three queries per page, whatever the number of rows.
    """

    def page(self, number):
        queryset = _ordered_queryset(self.object_list)
        if queryset is None:
            return super().page(number)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        keys = list(queryset.values_list("pk", flat=True)[bottom:top])
        return self._get_page(_page_records(self.object_list, keys), number, self)


class LazyKeyPaginator(LazyPaginator):
    """Like KeyPaginator without the count, for searches that must read every row.

    Counting would read them all a second time; this reads one key past the page to
    know whether there is a next one.
    """

    lazy = True

    def page(self, number):
        queryset = _ordered_queryset(self.object_list)
        if queryset is None:
            return super().page(number)
        number = self.validate_number(number or 1)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        keys = list(queryset.values_list("pk", flat=True)[bottom : top + self.orphans + 1])
        if len(keys) > self.per_page + self.orphans:
            self._num_pages = number + 1
            keys = keys[: self.per_page]
        elif number != 1 and len(keys) <= self.orphans:
            raise EmptyPage("That page contains no results")
        else:
            self._num_pages = self._final_num_pages = number
        return Page(_page_records(self.object_list, keys), number, self)


class PageTable(tables.Table):
    """Server-side sorted and paginated; ``?per_page=`` is honoured up to MAX_PER_PAGE.

    Cells come from the columns' ``render_<name>`` methods or the plain value, escaped by
    format_html; ``page_rows`` renders each row once instead of django-tables2's per-cell
    introspection, which costs more than the queries on a 50-row page.
    """

    def paginate(self, paginator_class=KeyPaginator, per_page=None, page=1, *args, **kwargs):
        per_page = max(1, min(per_page or DEFAULT_PER_PAGE, MAX_PER_PAGE))
        return super().paginate(paginator_class, per_page, page, *args, **kwargs)

    def page_rows(self):
        """The current page as ``<tr>`` HTML, one escaped string per row.

        Accessors are plain attribute names; a ``render_<name>`` method takes ``value``
        and/or ``record``, and is not called for an empty value unless it takes ``record``.
        """
        plan = []
        for column in self.columns:
            render = getattr(self, f"render_{column.name}", None)
            wants = signature(render)[0] if render else ()
            plan.append(
                (
                    column.name,
                    str(column.accessor),
                    render,
                    wants,
                    column.default,
                    column.column.empty_values,
                )
            )
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
                    "", '<td class="c-{}">{}</td>', zip((p[0] for p in plan), cells, strict=True)
                ),
            )

    class Meta:
        attrs = {"class": "mq-table"}
        template_name = "jobs/_table.html"
        per_page = DEFAULT_PER_PAGE
        order_by_field = "sort"
        page_field = "page"


# Columns the job table reads; the JSON documents stay in the database.
JOB_LIST_FIELDS = (
    "jid",
    "batch_id",
    "collection",
    "status",
    "last_successful_status",
    "retry_count",
    "priority",
    "space_needed",
    "local_id",
    "ark",
    "title",
    "last_modified",
    "message",
)


def job_rows():
    """The queryset behind every job table (list page and batch page)."""
    return Job.objects.only(*JOB_LIST_FIELDS).order_by("-jid")


class JobTable(PageTable):
    # Every sort ends on jid so that pages never overlap or skip a row.
    jid = tables.Column("Job", order_by=("jid",))
    batch = tables.Column("Batch", accessor="batch_id", order_by=("batch_id", "jid"))
    collection = tables.Column("Collection", order_by=("collection", "jid"))
    status = tables.Column("Status", order_by=("status", "jid"))
    last_successful_status = tables.Column(
        "Last successful", order_by=("last_successful_status", "jid")
    )
    retry_count = tables.Column("Retries", order_by=("retry_count", "jid"))
    priority = tables.Column("Priority", order_by=("priority", "jid"))
    space_needed = tables.Column("Size", order_by=("space_needed", "jid"))
    local_id = tables.Column("Local id", order_by=("local_id", "jid"))
    ark = tables.Column("ARK", order_by=("ark", "jid"))
    title = tables.Column("Title", orderable=False)
    last_modified = tables.Column("Last change", order_by=("last_modified", "jid"))
    message = tables.Column("Message", orderable=False)

    class Meta(PageTable.Meta):
        order_by = "-jid"
        empty_text = "No jobs match."

    def render_jid(self, value):
        return job_link(value)

    def render_batch(self, value):
        return batch_link(value)

    def render_status(self, value):
        return status_badge(value)

    def render_space_needed(self, value):
        return filesizeformat(value)

    def render_title(self, value):
        return truncated(value)

    def render_message(self, value):
        return truncated(value)

    def render_last_modified(self, value):
        return when(value)


def select_box(form: str, item_id: str):
    """A row's selection checkbox; it belongs to the list's action bar form."""
    return format_html(
        '<input type="checkbox" data-select name="ids" value="{}" form="{}"'
        ' aria-label="select {}">',
        item_id,
        form,
        item_id,
    )


class SelectJobTable(JobTable):
    """The job list: each row can be selected for an admin action."""

    select = tables.Column("", accessor="jid", orderable=False, empty_values=())

    class Meta(JobTable.Meta):
        sequence = ("select", "...")

    def render_select(self, record):
        return select_box("mq-actions-job", record.jid)
