"""The site's circuit breakers (``merritt_queue.services.breakers``) from settings, over the
process's ZooKeeper client: what the workers' adapters, the dashboard, /metrics and the
steering actions all read and write."""

from __future__ import annotations

from django.conf import settings

from ..services.breakers import Breakers, BreakerState, Policy
from .runtime import get_store


def policy() -> Policy:
    return Policy(
        threshold=settings.MQ_BREAKER_THRESHOLD, cool_off=settings.MQ_BREAKER_COOL_OFF_SECONDS
    )


def breakers() -> Breakers:
    return Breakers(lambda: get_store().client, policy())


def snapshot() -> list[BreakerState]:
    """Every breaker as it stands (``Breakers.snapshot``); a page's read, which writes
    nothing, so it does not ask the store to create the tree's containers."""
    return Breakers(lambda: get_store(init=False).client, policy()).snapshot()
