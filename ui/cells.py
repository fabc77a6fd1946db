"""How a value reads in a table cell or on a page; every result is escaped or plain text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone
from django.utils.html import format_html

from merritt_queue.core.tree import parse_timestamp

TRUNCATE = 80


# The one way a moment reads on every page (the ``when`` template filter, tables, cells),
# in the display zone (merritt_queue.project.display_zone); the same as the site's date
# formats (merritt_queue/project/formats), which Django's own pages and the admin use.
WHEN_FORMAT = "%Y-%m-%d %H:%M:%S %Z"


def when(value: datetime | str | None) -> str:
    """A moment in the display zone, to the second; a ZooKeeper timestamp string
    (``2026-11-24 10:01:02 +0000``) too, and any other text as it is."""
    if isinstance(value, str):
        parsed = parse_timestamp(value.strip())
        if parsed is None:
            return value or "—"
        value = parsed
    if value is None:
        return "—"
    if timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return timezone.localtime(value).strftime(WHEN_FORMAT)


def age_text(age: timedelta) -> str:
    """A short age: ``45 s``, ``12 min``, ``5 h 20 min``, ``3 d 4 h``."""
    seconds = max(0, int(age.total_seconds()))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 60:
        return f"{seconds} s"
    if minutes < 60:
        return f"{minutes} min"
    if hours < 48:
        return f"{hours} h {minutes % 60} min"
    return f"{days} d {hours % 24} h"


def status_badge(value: str):
    css = (value or "none").lower().replace(" ", "-")  # "Awaiting approval"
    return format_html('<span class="st st-{}">{}</span>', css, value or "—")


def removed_tag(badge, removed_at):
    """A list's status cell of a row kept after its item left the queue (history only)."""
    return format_html(
        '{} <span class="mq-removed" title="removed from the queue {}">removed</span>',
        badge,
        when(removed_at),
    )


def _start(value: str, length: int) -> str:
    return value[: length - 1].rstrip() + "…"


def truncated(value: str, length: int = TRUNCATE):
    """The start of a long text, the whole of it in the ``title`` tooltip."""
    if not value or len(value) <= length:
        return value or ""
    short = _start(value, length)
    return format_html('<span class="truncated" title="{}">{}</span>', value, short)


def message_cell(value: str, length: int = TRUNCATE):
    """A message in a table: a long one shows its start, the whole on hover (``title``) and
    when opened (a tap on a phone, which has no hover)."""
    if not value or len(value) <= length:
        return value or ""
    short = _start(value, length)
    return format_html(
        '<details class="msg"><summary title="{}"><span class="short">{}</span></summary>'
        '<span class="full">{}</span></details>',
        value,
        short,
        value,
    )


def select_box(form: str, item_id: str):
    """A row's selection checkbox; it belongs to the list's action bar form."""
    return format_html(
        '<input type="checkbox" data-select name="ids" value="{}" form="{}"'
        ' aria-label="select {}">',
        item_id,
        form,
        item_id,
    )
