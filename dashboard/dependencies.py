"""The dashboard's Dependencies panel: each outside dependency's circuit breaker
(``merritt_queue.services.breakers``), from the same snapshot /metrics reads.

Not the mirror: the breakers are a handful of ZooKeeper nodes, read at each view; when
ZooKeeper does not answer the panel says so and the rest of the page stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from merritt_queue.project.breakerboard import snapshot
from merritt_queue.project.zkdeadline import UNREACHABLE
from merritt_queue.services.breakers import BreakerState
from steering.actions.breakerswitch import CLOSED, OPEN


@dataclass(frozen=True)
class DependencyRow:
    name: str
    label: str
    status: str  # breakerswitch.OPEN or CLOSED: what the steering actions apply to
    by_hand: bool
    since: datetime | None
    failures: int
    next_probe: datetime | None
    last_error: str
    by: str
    reason: str

    @property
    def is_open(self) -> bool:
        return self.status == OPEN


def _at(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, UTC) if epoch else None


def row(s: BreakerState) -> DependencyRow:
    return DependencyRow(
        name=s.name,
        label=s.label,
        status=OPEN if s.is_open else CLOSED,
        by_hand=s.by_hand,
        since=_at(s.since),
        failures=s.failures,
        next_probe=_at(s.next_probe),
        last_error=s.last_error,
        by=s.by,
        reason=s.reason,
    )


def dependencies() -> tuple[list[DependencyRow], str]:
    """The rows, open ones first; or none and why they could not be read."""
    try:
        states = snapshot()
    except UNREACHABLE as e:
        return [], f"ZooKeeper does not answer ({e}): the breakers could not be read"
    rows = [row(s) for s in states]
    return sorted(rows, key=lambda r: not r.is_open), ""
