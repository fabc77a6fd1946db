"""Template filters of the dashboard pages."""

from django import template

register = template.Library()


@register.filter
def num(value) -> str:
    """A count with thousands separators (100,000); anything else unchanged."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
