"""Links to an item's page, built without a reverse() per row."""

from __future__ import annotations

from functools import lru_cache

from django.urls import get_script_prefix, reverse
from django.utils.html import format_html

from merritt_queue.core.tree import is_batch_id, is_job_id


@lru_cache(maxsize=16)
def _detail_url(name: str, script_prefix: str) -> tuple[str, str]:
    """The detail URL of ``name`` around its id, reversed once (reverse() is slow per row)."""
    url = reverse(name, args=["0"])
    head, _, tail = url.rpartition("0")
    return head, tail


def detail_url(name: str, item_id: str) -> str:
    head, tail = _detail_url(name, get_script_prefix())
    return f"{head}{item_id}{tail}"


def job_link(jid: str | None):
    """A link to the job, or its id as text when it is not a well-formed job id."""
    if not jid:
        return "—"
    if not is_job_id(jid):
        return jid
    return format_html('<a href="{}">{}</a>', detail_url("jobs:detail", jid), jid)


def batch_link(bid: str | None):
    if not bid:
        return "—"
    if not is_batch_id(bid):
        return bid
    return format_html('<a href="{}">{}</a>', detail_url("batches:detail", bid), bid)
