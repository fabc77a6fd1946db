"""``{{ moment|when }}``: the one template filter every page shows a time with (``ui.cells``).

A builtin (settings.TEMPLATES), so no template needs to load it.
"""

from __future__ import annotations

from django import template

from ui.cells import when as when_text

register = template.Library()


@register.filter
def when(value) -> str:
    return when_text(value)
