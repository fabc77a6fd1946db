"""The pre-flight summary on an awaiting batch's page: the summary's own template
(``batches/_preflight.html``), or, when none could be made at arrival, why."""

from __future__ import annotations

from django import template
from django.template.loader import render_to_string

register = template.Library()

PREFLIGHT = "batches/_preflight.html"
UNAVAILABLE = "batches/_preflight_unavailable.html"


@register.simple_tag(takes_context=True)
def preflight_summary(context, preflight):
    made = isinstance(preflight, dict) and preflight and "unavailable" not in preflight
    if not made:
        preflight = preflight if isinstance(preflight, dict) else {}
        preflight = {"unavailable": preflight.get("unavailable") or "none was recorded"}
    chosen = PREFLIGHT if made else UNAVAILABLE
    return render_to_string(chosen, {"preflight": preflight}, request=context.get("request"))
