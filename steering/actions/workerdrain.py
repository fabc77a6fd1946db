"""Draining a worker and undraining it: the steering actions on one worker process, through
the drain flag the worker reads (``merritt_queue.core.workerfacts``).

A drained worker finishes the step it runs, takes no more work and idles until undrained;
nothing is written to ZooKeeper, so the queue's jobs are untouched and go to other workers.
"""

from __future__ import annotations

from dataclasses import dataclass

import django_rq
from redis import Redis

from merritt_queue.core import workerfacts
from merritt_queue.core.errors import ChangedUnderYou, QueueError
from steering.actions.results import Applied

# A worker's status as the actions judge it.
WORKING, DRAINED, GONE = "Working", "Drained", "Gone"


@dataclass(frozen=True)
class WorkerItem:
    """A worker as read now: its name and ``WORKING``, ``DRAINED`` or ``GONE``."""

    name: str
    status: str


def redis() -> Redis:
    return django_rq.get_connection("default")


def status_of(drained: bool, registered: bool) -> str:
    if drained:
        return DRAINED
    return WORKING if registered else GONE


def read_worker(name: str) -> WorkerItem:
    drained, registered, recorded = workerfacts.standing(redis(), name)
    if not (drained or registered or recorded):
        raise QueueError(f"no worker {name} is known (it stopped, or never ran)")
    return WorkerItem(name, status_of(drained, registered))


def drain(_store, item: WorkerItem, params, note: str) -> Applied:
    by, _, reason = note.partition(": ")
    if not workerfacts.drain(redis(), item.name, by, reason):
        raise ChangedUnderYou(f"worker {item.name} is drained already")
    return Applied(None, "drained: it finishes its step and takes no more work")


def undrain(_store, item: WorkerItem, params, note: str) -> Applied:
    if not workerfacts.undrain(redis(), item.name):
        raise ChangedUnderYou(f"worker {item.name} was not drained")
    return Applied(None, "undrained: it takes work again")
