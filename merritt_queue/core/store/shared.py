"""What every part of the store is given: one client's engine and reads, their counts, its change
listeners, its session's locks, and what a job's step wrote before its status write.

Guarantee: one of each per ``QueueStore``. The parts hold no state of their own besides
their settings; whatever two parts must agree on lives here, so a part never reaches into
another part for it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kazoo.client import KazooClient

from ..itemkeys import NoProfiles, Profiles
from .changes import Changes, Listener
from .engine import Engine
from .reads import Reads
from .session import SessionLocks


class Shared:
    """The engine, reads, stats, changes and session locks the parts of one store share."""

    def __init__(
        self, client: KazooClient, *, actor: str = "", listeners: list[Listener] | None = None
    ):
        self.client = client
        self.engine = Engine(client)
        self.stats: Counter[str] = self.engine.stats
        self.reads = Reads(client, self.stats)
        self.changes = Changes(actor, listeners)
        self.session = SessionLocks(client, self.engine)
        # Which collection a profile ingests into: Merritt's items name only a profile,
        # and Merritt holds a collection by its profiles' names (``runtime`` sets it).
        self.profiles: Profiles = NoProfiles()
        # Data nodes this store wrote since it last wrote the job's status: a handler
        # writes them mid-step, and the record its commit returns (and tells the
        # listeners) must carry them, not the values read before the step.
        self.data_written: dict[str, dict[str, Any]] = {}
        # The status node's stat read right after a commit that kept the job's lock, by
        # job: the next ``still_ours`` answers from it instead of asking again.
        self.rechecked: dict[str, Any] = {}
