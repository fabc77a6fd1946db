"""Opening and closing a dependency's circuit breaker by hand: the steering actions on one
breaker (``merritt_queue.services.breakers``), say for EZID's announced downtime.

Opened by hand, a breaker is never probed: the jobs that need the dependency wait in their
state until a person closes it. Closed by hand, the jobs go on at their next try. Nothing
else of the queue is touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from merritt_queue.core.errors import ChangedUnderYou, QueueError
from merritt_queue.project.breakerboard import breakers
from merritt_queue.services.breakers import KNOWN
from steering.actions.results import Applied

# A breaker's status as the actions judge it.
OPEN, CLOSED = "Open", "Closed"
# A host's breaker: the kind, then a host name or address with an optional port.
_HOST_NAME = re.compile(r"^(webhook|content):[a-z0-9.\-\[\]:]{1,255}$")


@dataclass(frozen=True)
class DependencyItem:
    """A breaker as read now: its dependency's name and ``OPEN`` or ``CLOSED``."""

    name: str
    status: str


def name_problem(name: str) -> str | None:
    if name in KNOWN or _HOST_NAME.match(name):
        return None
    known = ", ".join(KNOWN)
    return (
        f"{name!r} is no dependency: one of {known}, or webhook:<host> or content:<host> "
        "(the host in lower case, with its port if it has one)"
    )


def read_dependency(name: str) -> DependencyItem:
    if problem := name_problem(name):
        raise QueueError(problem)
    return DependencyItem(name, OPEN if breakers().read(name).is_open else CLOSED)


def open_breaker(_store, item: DependencyItem, params, note: str) -> Applied:
    by, _, reason = note.partition(": ")
    board = breakers()
    if board.read(item.name).is_open:
        raise ChangedUnderYou(f"the breaker of {item.name} is open already")
    board.open_by_hand(item.name, by, reason)
    return Applied(None, "opened: the jobs that need it wait until it is closed by hand")


def close_breaker(_store, item: DependencyItem, params, note: str) -> Applied:
    by, _, reason = note.partition(": ")
    board = breakers()
    if not board.read(item.name).is_open:
        raise ChangedUnderYou(f"the breaker of {item.name} is closed already")
    board.close_by_hand(item.name, by, reason)
    return Applied(None, "closed: the jobs that wait for it go on at their next try")
