"""What the Workers page says of the reserved workers (``merritt_queue.core.lanes``): which
workers are reserved, and whether as many are alive as the site runs
(``MQ_RESERVED_WORKERS``). A worker is reserved by the queues it serves, as it registered
them: nothing else is written for it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings

from merritt_queue.core.lanes import is_reserved
from merritt_queue.core.queues import reserved_queue_names

RESERVED_TEXT = (
    "reserved: small and urgent jobs (the express lane), new batches, reports and short steps;"
    " never a large job's download"
)


def queues_text(queues: list[str]) -> str | None:
    """The words for a reserved worker's queues; None for any other worker."""
    if not is_reserved(queues):
        return None
    if set(queues) == set(reserved_queue_names()):
        return RESERVED_TEXT
    return f"reserved: {', '.join(queues)}"


@dataclass(frozen=True)
class ReservedCount:
    alive: int
    expected: int

    @property
    def short(self) -> bool:
        return self.alive < self.expected


def count(rows: Iterable) -> ReservedCount:
    """Reserved workers alive (busy, idle or draining: neither silent nor gone) of those the
    site runs."""
    alive = sum(
        1 for r in rows if is_reserved(r.queues) and r.state not in ("silent", "gone", "drained")
    )
    return ReservedCount(alive, settings.MQ_RESERVED_WORKERS)
