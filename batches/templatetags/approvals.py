"""The pre-flight summary on an awaiting batch's page: the summariser's own template
(``batches/_preflight.html``) when the site has it and the summary was made, else a short
fallback saying why there is none, so a missing template never breaks the page."""

from __future__ import annotations

from django import template
from django.template import TemplateDoesNotExist
from django.template.loader import get_template, render_to_string

register = template.Library()

PREFLIGHT = "batches/_preflight.html"
FALLBACK = "batches/_preflight_fallback.html"


@register.simple_tag(takes_context=True)
def preflight_summary(context, preflight):
    shown = {"preflight": preflight or {}}
    if not isinstance(preflight, dict) or "unavailable" in preflight:
        return render_to_string(FALLBACK, shown, request=context.get("request"))
    try:
        page = get_template(PREFLIGHT)
    except TemplateDoesNotExist:
        return render_to_string(FALLBACK, shown, request=context.get("request"))
    return page.render(shown, request=context.get("request"))
