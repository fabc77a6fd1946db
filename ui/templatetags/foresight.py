"""``{{ seconds|about }}``: a forecast's duration in words ("about 3 h 10 min"), the same on
the dashboard and a release's confirmation page (``ui.ahead``)."""

from __future__ import annotations

from datetime import timedelta

from django import template

from ui.cells import age_text

register = template.Library()


@register.filter
def about(seconds) -> str:
    """None (no rate to forecast at) reads "not at the current rate"; so does a value that is
    no number (a stored summary without its forecast)."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return "not at the current rate"
    if seconds <= 0:
        return "now"
    return f"about {age_text(timedelta(seconds=round(seconds)))}"


@register.filter
def grouped(value) -> str:
    """A count with thousands separators ("+1,204 jobs")."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
