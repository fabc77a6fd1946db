"""What the pages show of a wait: the lists' Waiting column and the words a reader may see.

The queue-wide facts are read once per table, whatever its rows (``jobs.waitfacts``), and
each row is decided from its own fields by ``merritt_queue.core.waiting.decide``: a page's
queries stay flat as its rows grow.
"""

from __future__ import annotations

import django_tables2 as tables
from django.utils.html import format_html

from jobs.waitfacts import queue_facts
from jobs.waitorder import batch_item, job_item
from merritt_queue.core import waiting as w
from ui.reading_scope import readable_collections


def sees_names(user) -> bool:
    """Whether ``user`` reads the whole queue (staff): a depositor, scoped to collections,
    is not shown who paused or held, nor another collection's job."""
    return user is not None and readable_collections(user) is None


def words_for(found: w.Waiting, user) -> str:
    return found.words if sees_names(user) or not found.public_words else found.public_words


def waiting_column() -> tables.Column:
    """The lists' Waiting column; its table renders it with ``waiting_cell``."""
    return tables.Column("Waiting", accessor="pk", orderable=False, empty_values=())


def waiting_cell(table, record, kind: str) -> str:
    """Why the row's job or batch (``kind``) waits: its reason, its words on hover."""
    facts = getattr(table, "_waiting_facts", None)
    if facts is None:
        facts = table._waiting_facts = queue_facts()
    found = w.decide(job_item(record) if kind == "job" else batch_item(record), facts)
    if found is None:
        return "—"
    request = getattr(table, "request", None)
    words = words_for(found, getattr(request, "user", None))
    return format_html(
        '<span class="wait wait-{}" title="{}">{}</span>', found.code, words, found.label
    )


def waiting_context(found: w.Waiting | None, user) -> dict:
    """What ``jobs/_waiting.html`` reads."""
    return {"waiting": found, "waiting_words": words_for(found, user) if found else ""}
