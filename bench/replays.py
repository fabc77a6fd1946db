"""Merritt's storage and inventory consumers, replayed beside the queue in threads of the
bench's process, each on its own ZooKeeper session, with their requests counted.

The replays are the ones the tests use (``harness.merrittservices``): the same reads,
writes and locks as mrt-store's and mrt-inventory's consumers, the same fetches over
HTTP. Each runs as its daemon does: take every job it can, then wait ``IDLE_WAIT``
seconds when none is left. A replay that raises stops the run (``Replays.check``) instead
of leaving the batch waiting in Storing until the time-out.
"""

from __future__ import annotations

import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kazoo.client import KazooClient

from harness.httpserver import HttpServer
from harness.merrittservices import InventoryReplay, StorageReplay
from harness.merrittstore import MerrittStore
from harness.merrittzk import MerrittZK

NODE = 9501
# The Java daemons poll every few seconds; a shorter wait keeps the run's rate about the
# queue, not about the replays' sleep.
IDLE_WAIT = 0.1
# The kazoo requests ZooKeeper commits as a transaction (a zxid each, refused ones too).
WRITES = {"Create", "Create2", "Delete", "SetData", "SetACL", "Transaction", "Reconfig"}


class RequestCounter:
    """Counts every request a kazoo client sends through ``_call`` (pings go around it)."""

    def __init__(self, client: KazooClient) -> None:
        self.requests = 0
        self.writes = 0
        self.kinds: Counter[str] = Counter()
        self._lock = threading.Lock()
        call = client._call

        def counted(request, async_object):
            with self._lock:
                kind = type(request).__name__
                self.requests += 1
                self.writes += kind in WRITES
                self.kinds[kind] += 1
            return call(request, async_object)

        client._call = counted


class Replays:
    """Storage's and inventory's consumers on two sessions of ``hosts``/``chroot``."""

    def __init__(self, connect: Callable[[], KazooClient], state: MerrittStore) -> None:
        self.clients = [connect(), connect()]
        self.counters = [RequestCounter(c) for c in self.clients]
        self.storage = StorageReplay(MerrittZK(self.clients[0]), nodes=(NODE,), state=state)
        self.inventory = InventoryReplay(MerrittZK(self.clients[1]), self.storage)
        self.failure: str | None = None
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._serve, args=(r.poll,), daemon=True, name=name)
            for name, r in (("storage", self.storage), ("inventory", self.inventory))
        ]

    def counts(self) -> tuple[int, int]:
        """(requests, writes) both replays have sent so far."""
        return sum(c.requests for c in self.counters), sum(c.writes for c in self.counters)

    def kinds(self) -> dict[str, dict[str, int]]:
        """Each replay's requests so far by kazoo request kind."""
        names = ("storage", "inventory")
        return {n: dict(c.kinds) for n, c in zip(names, self.counters, strict=True)}

    def check(self) -> dict:
        """Raise ``SystemExit`` once a replay has failed; else how many jobs each took."""
        if self.failure:
            raise SystemExit(f"bench merritt: a replay failed:\n{self.failure}")
        return {"stored": len(self.storage.taken), "recorded": len(self.inventory.taken)}

    def _serve(self, poll: Callable[[], object]) -> None:
        try:
            while not self._stop.is_set():
                while poll() is not None:
                    pass
                self._stop.wait(IDLE_WAIT)
        except Exception:
            self.failure = traceback.format_exc()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        for client in self.clients:
            client.stop()
            client.close()


@contextmanager
def storage_state(root: Path) -> Iterator[MerrittStore]:
    """Storage's ``/state/`` on a loopback port, answering what the storage replay stored:
    our Notify of a ``merritt-queue`` job reads there the version it records."""
    server = HttpServer(root)
    server.root.mkdir(parents=True, exist_ok=True)
    server.start()
    try:
        yield MerrittStore(server, node=str(NODE))
    finally:
        server.stop()


@contextmanager
def replays(connect: Callable[[], KazooClient], state: MerrittStore) -> Iterator[Replays]:
    """Both replays serving until the block ends."""
    running = Replays(connect, state)
    running.start()
    try:
        yield running
    finally:
        running.stop()
