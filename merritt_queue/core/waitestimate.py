"""When a job waiting for a worker should start and finish, from the pace of the last hour.

The jobs ahead of it leave its state at the pace jobs finished while the queue was busy;
then it takes as long as jobs lately took from leaving that state to their end. A guess
that says what it rests on: with no pace measured there is none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .waiting import Order


@dataclass(frozen=True)
class Rate:
    """The pace measured over the last hour: jobs finished per second while the queue was
    busy, and how long a job took from leaving a state to its end."""

    per_second: float | None
    seconds_after: Mapping[str, float] = field(default_factory=dict)


def estimate(
    position: int, jobs_ahead: int, bytes_ahead: int, status: str, rate: Rate, now: datetime
) -> Order:
    """When the job at ``position`` of its state should start and finish: the jobs ahead
    leave the state at the measured pace, then it takes as long as jobs lately took from
    there to the end. No pace measured: no estimate."""
    order = Order(position, jobs_ahead, bytes_ahead)
    if not rate.per_second:
        return order
    order.starts_at = now + timedelta(seconds=jobs_ahead / rate.per_second)
    rest = rate.seconds_after.get(status, 1 / rate.per_second)
    order.finishes_at = order.starts_at + timedelta(seconds=rest)
    return order
