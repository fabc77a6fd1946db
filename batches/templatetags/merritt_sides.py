"""The "Merritt ingest" label: items this site's workers leave to Merritt's own ingest."""

from __future__ import annotations

from django import template
from django.conf import settings
from django.utils.html import format_html

from merritt_queue.core.sides import MERRITT_LABEL, runs_batch, runs_job

register = template.Library()


def merritt_label():
    title = f"This site's workers (MQ_WORKERS={settings.MQ_WORKERS}) leave it to Merritt's ingest"
    return format_html('<span class="st st-merritt" title="{}">{}</span>', title, MERRITT_LABEL)


@register.simple_tag
def merritt_batch_label(submission):
    return "" if runs_batch(settings.MQ_WORKERS, submission) else merritt_label()


@register.simple_tag
def merritt_job_label(configuration):
    return "" if runs_job(settings.MQ_WORKERS, configuration) else merritt_label()
