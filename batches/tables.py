"""The batch list table; every cell is escaped (format_html or plain text)."""

from __future__ import annotations

import django_tables2 as tables
from django.utils import timezone
from django.utils.html import format_html

from batches.models import Batch
from batches.templatetags.merritt_sides import merritt_batch_label
from jobs.waitcells import waiting_cell, waiting_column
from merritt_queue.core.planning import TYPE_WORDS
from merritt_queue.core.states import JobStatus
from steering.templatetags.steering import may_select
from ui.cells import (
    age_text,
    message_cell,
    removed_tag,
    select_box,
    status_badge,
    truncated,
    when,
)
from ui.links import batch_link
from ui.tables import PageTable

BATCH_LIST_FIELDS = (
    "bid",
    "uuid",
    "collection",
    "submitter",
    "type",
    "title",
    "submitted",
    "status",
    "approval",  # a Held batch's: awaiting approval is shown as a state of its own
    "job_counts",
    "message",
    "submission",  # for the "Merritt ingest" label
    "locked",
    "removed_at",
)
_STATUS_ORDER = {s.value: i for i, s in enumerate(JobStatus)}


def batch_rows():
    return Batch.objects.only(*BATCH_LIST_FIELDS).order_by("-bid")


def job_counts_text(counts) -> str:
    """``{"Failed": 1, "Completed": 3}`` -> ``3 Completed · 1 Failed`` (in state order)."""
    if not isinstance(counts, dict) or not counts:
        return "—"
    ordered = sorted(counts.items(), key=lambda kv: (_STATUS_ORDER.get(kv[0], 99), kv[0]))
    return " · ".join(f"{n} {status}" for status, n in ordered if n)


class BatchTable(PageTable):
    """Id, status and message come first, as in the job table: a batch that failed before it
    made any jobs has only its message to say why."""

    # Every sort ends on bid so that pages never overlap or skip a row.
    bid = tables.Column("Batch", order_by=("bid",))
    status = tables.Column("Status", order_by=("status", "bid"))
    message = tables.Column("Message", orderable=False)
    waiting = waiting_column()
    uuid = tables.Column("batchID", order_by=("uuid", "bid"))
    collection = tables.Column("Collection", order_by=("collection", "bid"))
    submitter = tables.Column("Submitter", order_by=("submitter", "bid"))
    type = tables.Column("Type", order_by=("type", "bid"))
    title = tables.Column("Title", orderable=False)
    submitted = tables.Column("Submitted", order_by=("submitted", "bid"))
    job_counts = tables.Column("Jobs", orderable=False, empty_values=())
    # Youngest first when ascending: the opposite of "submitted".
    age = tables.Column("Age", accessor="submitted", order_by=("-submitted", "-bid"))

    class Meta(PageTable.Meta):
        order_by = "-bid"
        empty_text = "No batches match."

    def render_bid(self, value):
        return batch_link(value)

    def render_waiting(self, record):
        return waiting_cell(self, record, "batch")

    def render_title(self, value):
        return truncated(value)

    def render_type(self, value):
        """The type in words, as the submission form says it; its code on hover."""
        return format_html('<span title="{}">{}</span>', value, TYPE_WORDS.get(value, value))

    def render_message(self, value):
        return message_cell(value)

    def render_submitted(self, value):
        return when(value)

    def render_status(self, value, record):
        badge = status_badge(getattr(record, "shown_status", value))
        if getattr(record, "removed_at", None):
            badge = removed_tag(badge, record.removed_at)
        return format_html("{} {}", badge, merritt_batch_label(getattr(record, "submission", None)))

    def render_job_counts(self, value):
        return job_counts_text(value)

    def render_age(self, value):
        return age_text(timezone.now() - value)


class SelectBatchTable(BatchTable):
    """The batch list: each row can be selected for an admin action."""

    select = tables.Column("", accessor="bid", orderable=False, empty_values=())

    class Meta(BatchTable.Meta):
        sequence = ("select", "...")

    def render_select(self, record):
        return select_box("mq-actions-batch", record.bid)

    def before_render(self, request):
        if not may_select(request.user, "batch"):  # a viewer: nothing to select for
            self.columns.hide("select")
