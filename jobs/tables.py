"""The job tables (the job list, a batch's jobs); every cell is escaped (format_html or text)."""

from __future__ import annotations

import django_tables2 as tables
from django.db.models.fields.json import KT
from django.template.defaultfilters import filesizeformat
from django.utils.html import format_html

from jobs.models import Job
from jobs.stalls import stalled_among
from jobs.waitcells import waiting_cell, waiting_column
from jobs.waitorder import list_keys
from merritt_queue.core import stepowners
from merritt_queue.core.sides import merritt_service_of
from merritt_queue.core.states import JOB_STEPS
from steering.templatetags.steering import may_select
from ui import quarantine
from ui.cells import message_cell, removed_tag, select_box, status_badge, truncated, when
from ui.links import batch_link, job_link
from ui.tables import PageTable

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
    "locked",
    "removed_at",
)


def job_rows():
    """The queryset behind every job table (list page and batch page). Of the configuration
    only who stores and records is read, for the rows of the page alone."""
    return (
        Job.objects.only(*JOB_LIST_FIELDS)
        .annotate(store_record=KT(f"configuration__{stepowners.KEY}"), **list_keys())
        .order_by("-jid")
    )


class JobTable(PageTable):
    """Id, status and message come first: why a job stopped is what a reader looks for, and
    a narrow screen shows the first columns."""

    # Every sort ends on jid so that pages never overlap or skip a row.
    jid = tables.Column("Job", order_by=("jid",))
    status = tables.Column("Status", order_by=("status", "jid"))
    message = tables.Column("Message", orderable=False)
    waiting = waiting_column()
    batch = tables.Column("Batch", accessor="batch_id", order_by=("batch_id", "jid"))
    collection = tables.Column("Collection", order_by=("collection", "jid"))
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

    class Meta(PageTable.Meta):
        order_by = "-jid"
        empty_text = "No jobs match."

    def render_jid(self, value):
        return job_link(value)

    def render_batch(self, value):
        return batch_link(value)

    # The page's rows in a step, judged once per table when the first is shown (jobs.stalls).
    _stalled: frozenset[str] | None = None

    def _stalled_on_page(self) -> frozenset[str]:
        page = getattr(self, "page", None)
        rows = page.object_list if page is not None else self.data
        records = [getattr(r, "record", r) for r in rows]  # a page holds BoundRows
        return stalled_among([r.jid for r in records if r.status in JOB_STEPS])

    def render_status(self, value, record):
        who = merritt_service_of({stepowners.KEY: getattr(record, "store_record", None)}, value)
        badge = status_badge(value)
        if value in JOB_STEPS:
            if self._stalled is None:
                self._stalled = self._stalled_on_page()
            if record.jid in self._stalled:
                badge = format_html(
                    '{} <a class="st st-stalled" href="/jobs/?stalled=1" title="far longer in {} '
                    'than jobs of its size usually take">stalled</a>',
                    badge,
                    value,
                )
        if (q := self._quarantined().get(record.jid)) is not None:
            badge = format_html(
                '{} <span class="mq-quarantined" title="{}">quarantined</span>', badge, q.words
            )
        if getattr(record, "removed_at", None):
            badge = removed_tag(badge, record.removed_at)
        if not who:
            return badge
        return format_html('{} <span class="st-who">{} has it</span>', badge, who)

    def _quarantined(self) -> dict:
        """The page's quarantined jobs, read once for all its rows."""
        if not hasattr(self, "_quarantine"):
            rows = self.page.object_list if hasattr(self, "page") else []
            jids = [r.record.jid for r in rows if r.record.status == "Failed"]
            self._quarantine = quarantine.of(jids)
        return self._quarantine

    def render_space_needed(self, value):
        return filesizeformat(value)

    def render_waiting(self, record):
        return waiting_cell(self, record, "job")

    def render_title(self, value):
        return truncated(value)

    def render_message(self, value):
        return message_cell(value)

    def render_last_modified(self, value):
        return when(value)


class SelectJobTable(JobTable):
    """The job list: each row can be selected for an admin action."""

    select = tables.Column("", accessor="jid", orderable=False, empty_values=())

    class Meta(JobTable.Meta):
        sequence = ("select", "...")

    def render_select(self, record):
        return select_box("mq-actions-job", record.jid)

    def before_render(self, request):
        if not may_select(request.user, "job"):  # a viewer: nothing to select for
            self.columns.hide("select")
