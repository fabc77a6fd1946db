"""The site's retention, run by the dispatcher's periodic hook: ``merritt_queue.core.retention``
with the settings, each slice that removed anything audited as an admin action of the system.

The removals are written as the ``retention`` actor; the mirror drops the removed items' rows
as it does after any cleanup, and keeps their timelines and step records.
"""

from __future__ import annotations

import time
import uuid

from django.conf import settings
from django.utils import timezone

from merritt_queue.core import retention
from merritt_queue.core.store import QueueStore
from steering.models import AdminAction, AdminActionItem

ACTOR = "retention"
now = time.time  # replaced by the tests, to age the tree
_keepers: dict[int, retention.Retention] = {}
WHY = {
    "age": "finished longer ago than MQ_CLEANUP_RETENTION_DAYS",
    "pressure": "oldest finished while an index directory nears MQ_ZK_MAXBUFFER",
}


def policy() -> retention.Policy:
    days = float(settings.MQ_CLEANUP_RETENTION_DAYS)
    return retention.Policy(
        retention_seconds=None if days < 0 else days * 86400, limit=settings.MQ_ZK_MAXBUFFER
    )


def run(store: QueueStore) -> float | None:
    """One slice; the seconds until the next is due (None: retention is off)."""
    if not settings.MQ_CLEANUP_AUTO:
        return None
    keeper, wanted = _keepers.get(id(store)), policy()
    if keeper is None or keeper.policy != wanted:
        keeper = _keepers[id(store)] = retention.Retention(store, wanted, now=lambda: now())
    with store.changes.acting_as(ACTOR):
        done = keeper.step()
    if done.rows:
        record(done.rows, keeper.policy)
    return done.wait


def busy() -> bool:
    """Whether a pass is under way (its next slice due at once)."""
    return any(k._work for k in _keepers.values())


def forget() -> None:
    _keepers.clear()


def record(rows: list[retention.Removed], used: retention.Policy) -> AdminAction:
    done = sum(r.result == "done" for r in rows)
    action = AdminAction.objects.create(
        user=None,
        username="system",
        action="cleanup",
        scope="queue",
        reason="retention",
        params={
            "retention_days": settings.MQ_CLEANUP_RETENTION_DAYS,
            "limit_bytes": used.limit,
            "why": sorted({r.why for r in rows}),
        },
        total=len(rows),
        done=done,
        failed=len(rows) - done,
        token=uuid.uuid4().hex,
        finished=timezone.now(),
    )
    AdminActionItem.objects.bulk_create(
        AdminActionItem(
            admin_action=action,
            item_id=r.item_id,
            before_status=r.before_status,
            before_version=r.before_version,
            result=r.result,
            detail=f"{r.detail} ({WHY[r.why]})",
        )
        for r in rows
    )
    return action
