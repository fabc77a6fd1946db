"""The access list's table: both queues' requests, every cell escaped."""

from __future__ import annotations

import django_tables2 as tables
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from access.models import AccessRequest
from steering.templatetags.steering import may_select
from ui.cells import age_text, message_cell, removed_tag, select_box, status_badge, truncated, when
from ui.tables import PageTable

FORM = "mq-actions-access"


def detail_url(row: AccessRequest) -> str:
    return reverse("accessui:detail", args=[row.queue, row.qid])


class AccessTable(PageTable):
    """Request and status first, as on the job list; then what the token says."""

    select = tables.Column("", accessor="key", orderable=False, empty_values=())
    key = tables.Column("Request", order_by=("queue", "qid"))
    status = tables.Column("Status", order_by=("status", "queue", "qid"))
    message = tables.Column("Message", orderable=False)
    size = tables.Column("Size", order_by=("size", "queue", "qid"))
    delivery_node = tables.Column("Delivery node", order_by=("delivery_node", "queue", "qid"))
    anticipated_availability = tables.Column("Available by", orderable=False)
    url = tables.Column("URL", orderable=False)
    age = tables.Column("Age", accessor="created_at", order_by=("created_at", "queue", "qid"))
    status_changed_at = tables.Column("Last change", order_by=("status_changed_at", "qid"))
    locked = tables.Column("Lock", orderable=False)

    class Meta(PageTable.Meta):
        order_by = ("-age",)
        empty_text = "No access requests match."

    def render_select(self, record):
        return select_box(FORM, record.key)

    def render_key(self, value, record):
        return format_html('<a href="{}">{}</a>', detail_url(record), value)

    def render_status(self, value, record):
        badge = status_badge(value or "unreadable")
        if record.problem:
            badge = format_html('{} <span class="mq-error">{}</span>', badge, record.problem)
        if record.removed_at:
            badge = removed_tag(badge, record.removed_at)
        return badge

    def render_message(self, value):
        return message_cell(value)

    def render_size(self, value):
        return filesizeformat(value)

    def render_url(self, value):
        return truncated(value)

    def render_age(self, value):
        return format_html(
            '<span title="{}">{}</span>', when(value), age_text(timezone.now() - value)
        )

    def render_status_changed_at(self, value):
        return when(value)

    def render_locked(self, value):
        return "locked" if value else "—"

    def before_render(self, request):
        if not may_select(request.user, "access"):
            self.columns.hide("select")
