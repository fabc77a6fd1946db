"""What every part of the store builds on: the client, its engine (reads and multis),
its change listeners, and the profiles that name a collection."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient

from .. import tree as t
from ..itemkeys import NoProfiles, Profiles
from .changes import Changes, Listener
from .engine import Engine, log

if TYPE_CHECKING:
    from ..records import BatchRecord, JobRecord

__all__ = ["StoreBase", "log"]


class StoreBase:
    """What every part of ``QueueStore`` builds on (the parts are mixins of it)."""

    def __init__(
        self, client: KazooClient, *, actor: str = "", listeners: list[Listener] | None = None
    ):
        self.client = client
        self.engine = Engine(client)
        self.stats: Counter[str] = self.engine.stats
        self.changes = Changes(actor, listeners)
        # Data nodes this store wrote since it last wrote the job's status: a handler
        # writes them mid-step, and the record its commit returns (and tells the
        # listeners) must carry them, not the values read before the step.
        self._data_written: dict[str, dict[str, Any]] = {}
        # The status node's stat read right after a commit that kept the job's lock, by
        # job: the next ``still_ours`` answers from it instead of asking again.
        self._rechecked: dict[str, Any] = {}
        # Which collection a profile ingests into: Merritt's items name only a profile,
        # and Merritt holds a collection by its profiles' names (``runtime`` sets it).
        self.profiles: Profiles = NoProfiles()

    @property
    def listeners(self) -> list[Listener]:
        return self.changes.listeners

    @listeners.setter
    def listeners(self, listeners: list[Listener]) -> None:
        self.changes.listeners = listeners

    @property
    def actor(self) -> str:
        """Who is writing ("worker", "admin:<user>"), recorded with each change."""
        return self.changes.actor

    @actor.setter
    def actor(self, actor: str) -> None:
        """The process's actor (a worker, the dispatcher, a command)."""
        self.changes.default_actor = actor

    def acting_as(self, actor: str) -> AbstractContextManager[None]:
        """Write as ``actor`` in this thread or task for the block only: one store serves
        every request thread, and their people must not mix."""
        return self.changes.acting_as(actor)

    @contextmanager
    def deferred_changes(self, max_delay: float | None = None) -> Iterator[None]:
        """Hold the listeners' calls until the block ends, then give them all at once.

        For bulk writes and chained steps: a listener with a ``many`` attribute (the
        mirror) then writes them in one database transaction instead of one per item.
        With ``max_delay``, no change waits longer than that many seconds (see
        ``changebuffer``); ``max_delay=0`` holds nothing back.
        """
        with self.changes.deferred(max_delay):
            yield

    def children_many(
        self, paths: Iterable[str], watches: Mapping[str, Callable] | None = None
    ) -> dict[str, list[str] | None]:
        """Children of many nodes in one pipelined round; a missing node gives None.
        ``watches``: a one-shot watch to arm on some of them, by path."""
        return self.engine.children_many(paths, watches)

    def watch_nodes(self, watches: Mapping[str, Callable]) -> None:
        """Arm a one-shot watch on each node (path: watcher), in one pipelined round."""
        self.engine.watch_nodes(watches)

    def exists_many(self, paths: list[str]) -> list[bool]:
        """Whether each node exists, in one pipelined round."""
        return self.engine.exists_many(paths)

    def jobs_locked(self, paths: list[str]) -> list[bool]:
        """Whether each job lock is held by a worker (ours or Merritt's); a parked one is not."""
        return self.engine.held_many(paths)

    def init(self) -> None:
        """Create the empty containers of zk-tree.md (idempotent)."""
        for path in t.CONTAINERS:
            self.client.ensure_path(path)

    if TYPE_CHECKING:
        # The parts call each other: declared here so that each part type-checks alone,
        # defined by the part the operation belongs to.
        def get_job(self, jid: str, *, locked: bool | None = None) -> JobRecord: ...
        def _send_job_read(self, jid: str) -> Callable[[], dict[str, Any]]: ...
        def _job_from_read(
            self, jid: str, read: Callable[[], dict[str, Any]], locked: bool
        ) -> JobRecord: ...
        def get_batch(self, bid: str) -> BatchRecord: ...
        def batch_jobs(self, bid: str) -> dict[str, list[str]]: ...
        def batch_statuses(self, bids: Iterable[str] | None = None) -> dict[str, dict]: ...
        def find_batch_by_uuid(self, uuid: str) -> str | None: ...
        def jobs_in_state(
            self, status: str, watch: Callable | None = None
        ) -> list[tuple[int, str]]: ...
        def release_job(self, jid: str, message: str = "") -> JobRecord: ...
        def release_batch(self, bid: str, message: str = "") -> BatchRecord: ...
        def item_hold(self, data: dict | None) -> str | None: ...
