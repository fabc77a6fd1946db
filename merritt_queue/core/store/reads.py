"""The store's reads of ZooKeeper: nodes, listings and stats, pipelined or in one
``multiRead`` where many are asked at once, each round counted in the store's ``stats``.
The writes (multis, mending, single writes) are ``engine.Engine``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.serialization import Exists

from .. import kazoocall, parking
from .. import multiread as mr


def stat_async(client: KazooClient, path: str) -> Any:
    """``client.exists(path)`` sent now, its pending result; uncounted, the request built
    here as ``Engine`` builds a multi's."""
    return kazoocall.send(client, Exists(mr.rooted(client.chroot, path), None))


class Reads:
    """Reads over one kazoo client, counted in ``stats`` (shared with the store's engine)."""

    def __init__(self, client: KazooClient, stats: Counter[str]):
        self.client = client
        self.stats = stats

    def get_many(self, paths: Iterable[str]) -> dict[str, tuple[bytes, Any] | None]:
        """Read many nodes in one round; a missing node (optional, or the item vanished:
        the caller decides) reads as None.

        One ``multiRead`` request where the server has it: a request costs kazoo's thread
        and ZooKeeper far more than the few bytes each read adds, and a job's read is a
        dozen nodes. Read in order, as pipelined reads would be.
        """
        self.stats["round_trips"] += 1
        return self.get_many_later(paths)()

    def get_many_later(
        self, paths: Iterable[str]
    ) -> Callable[[], dict[str, tuple[bytes, Any] | None]]:
        """``get_many`` sent now, answered when called: uncounted, for a read sent behind
        another request (ZooKeeper serves a session's requests in order)."""
        paths = list(paths)
        reads = mr.start(self.client, [(mr.GET, p) for p in paths])
        return lambda: dict(zip(paths, reads.results(), strict=True))

    def read(self, requests: Sequence[mr.Request]) -> list:
        """Gets and listings (``multiread.GET``/``CHILDREN``, path) in one round, in order;
        a missing node reads as None."""
        self.stats["round_trips"] += 1
        return mr.start(self.client, requests).results()

    def children(self, path: str, watch: Callable | None = None) -> list[str]:
        self.stats["round_trips"] += 1
        try:
            return self.client.get_children(path, watch=watch)
        except NoNodeError:  # a lazily created directory that does not exist yet is empty
            return []

    def children_stat(self, path: str) -> tuple[list[str], Any] | None:
        """A node's children and its stat in one round; None when it is missing."""
        self.stats["round_trips"] += 1
        try:
            return self.client.get_children(path, include_data=True)
        except NoNodeError:
            return None

    def children_many(
        self, paths: Iterable[str], watches: Mapping[str, Callable] | None = None
    ) -> dict[str, list[str] | None]:
        """Children of many nodes in one pipelined round; a missing node gives None.
        ``watches``: a one-shot watch to arm on some of them, by path."""
        watches = watches or {}
        pending = [(p, self.client.get_children_async(p, watch=watches.get(p))) for p in paths]
        self.stats["round_trips"] += 1
        out: dict[str, list[str] | None] = {}
        for path, result in pending:
            try:
                out[path] = result.get()
            except NoNodeError:  # caller tells "missing" from "empty"
                out[path] = None
        return out

    def watch_nodes(self, watches: Mapping[str, Callable]) -> None:
        """Arm a one-shot watch on each node (path: watcher), in one pipelined round: it
        fires when the node changes, is created or is deleted."""
        if not watches:
            return
        pending = [self.client.exists_async(p, watch=fn) for p, fn in watches.items()]
        self.stats["round_trips"] += 1
        for result in pending:
            result.get()

    def exists(self, path: str) -> Any:
        self.stats["round_trips"] += 1
        return self.stat(path)

    def stat(self, path: str) -> Any:
        """``client.exists(path)``, uncounted, the request built here as ``_send`` does:
        the hot single requests of a step (a lock, the re-check between steps)."""
        return stat_async(self.client, path).get()

    def exists_many(self, paths: list[str]) -> list[bool]:
        """Whether each node exists, in one round: read as ``get_many`` reads (the nodes
        asked are locks and flags, empty), one multiRead rather than a request each."""
        self.stats["round_trips"] += 1
        return [
            r is not None for r in mr.start(self.client, [(mr.GET, p) for p in paths]).results()
        ]

    def held_many(self, paths: list[str]) -> list[bool]:
        """Whether each job lock is held by someone, in one round: a parked lock
        (``parking``) is a lock to Merritt's consumers but free to this project's workers."""
        self.stats["round_trips"] += 1
        return [
            r is not None and not parking.is_parked(r[0], r[1].ephemeralOwner)
            for r in mr.start(self.client, [(mr.GET, p) for p in paths]).results()
        ]
