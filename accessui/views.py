"""The access queue's pages: the list of both queues and one request. They read the mirror
(``access.AccessRequest``, ``access.AccessEvent``); only each queue's pause, two small nodes,
is read from ZooKeeper, and shown as unknown when it does not answer."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from kazoo.exceptions import KazooException

from access.models import AccessEvent, AccessRequest
from accessui.filters import AccessFilter
from accessui.tables import AccessTable
from merritt_queue.core import access
from merritt_queue.core.errors import QueueError
from merritt_queue.project.runtime import get_store
from merritt_queue.project.zkdeadline import UNREACHABLE
from steering.actions.catalog import ACTIONS
from steering.templatetags.steering import may
from ui.listing import filtered_table
from ui.reading_scope import in_readable, may_read, reads_everything

log = logging.getLogger(__name__)


def pause_states() -> Mapping[str, bool | None]:
    """Whether each access queue is paused; None for each when ZooKeeper does not answer."""
    try:
        return dict(access.paused(get_store(init=False).client))
    except (QueueError, KazooException, *UNREACHABLE) as e:
        log.warning("the access queues' pause could not be read: %r", e)
        return dict.fromkeys(access.QUEUES)


def queue_facts(user, paused: Mapping[str, bool | None]) -> list[dict]:
    """Per queue: its pause and its requests counted by status (the mirror's, not removed)."""
    rows = in_readable(user, AccessRequest.objects.filter(removed_at__isnull=True))
    counted = rows.values_list("queue", "status").annotate(n=Count("id")).order_by()
    counts: dict[str, dict[str, int]] = {q: {} for q in access.QUEUES}
    for queue, status, n in counted:
        counts.setdefault(queue, {})[status or "unreadable"] = n
    return [
        {
            "name": q,
            "paused": paused.get(q),
            "counts": [(s.value, counts[q].get(s.value, 0)) for s in access.AccessStatus],
            "total": sum(counts[q].values()),
            "pause": ACTIONS["access.pause"] if may(user, ACTIONS["access.pause"]) else None,
            "unpause": ACTIONS["access.unpause"] if may(user, ACTIONS["access.unpause"]) else None,
        }
        for q in access.QUEUES
    ]


@login_required
def access_list(request):
    rows = in_readable(request.user, AccessRequest.objects.all())
    filterset, table = filtered_table(request, AccessFilter, rows, AccessTable)
    return render(
        request,
        "accessui/access_list.html",
        {
            "filter": filterset,
            "table": table,
            "queues": queue_facts(request.user, pause_states()),
            "may_cleanup": may(request.user, ACTIONS["access.cleanup"]),
            "collections": [],
        },
    )


@login_required
def access_detail(request, queue: str, qid: str):
    row = get_object_or_404(AccessRequest, queue=queue, qid=qid)
    # A request of no known collection: only for readers of every collection (may_read).
    if not may_read(request.user, row.collection):
        raise Http404("No such item.")
    events = AccessEvent.objects.filter(key=row.key).order_by("-status_version", "-at")
    token = sorted((row.token_data or {}).items())
    return render(
        request,
        "accessui/access_detail.html",
        {"row": row, "events": events[:200], "token": token},
    )


def readable(user, collection: str) -> bool:
    """A request of no known collection is for those who read every collection only."""
    return may_read(user, collection) if collection else reads_everything(user)
