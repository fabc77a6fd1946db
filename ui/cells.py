"""How a value reads in a table cell or on a page; every result is escaped or plain text."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.html import format_html

TRUNCATE = 80


def when(value: datetime | None) -> str:
    """A timestamp in the site's time zone, to the second."""
    if value is None:
        return "—"
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z")


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
    return format_html('<span class="st st-{}">{}</span>', (value or "none").lower(), value or "—")


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
