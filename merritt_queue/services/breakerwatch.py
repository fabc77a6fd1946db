"""The breakers' nodes as a worker last read them, kept true by ZooKeeper watches.

Every guarded call asks its breaker first (``Breakers.admit``); reading the node each time
would cost a round trip per call. The answer is kept per client and dropped when the node's
watch fires (any write, by any worker) and on every change of the connection's state (a
lost session loses its watches), then read again, with a new watch. A closed breaker read
a moment late lets one more call through; an open one refuses one call more: both are what
a call made just before the change would have met. Writes never use it: each reads the node
afresh and writes at that version.
"""

from __future__ import annotations

import threading

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

_guard = threading.Lock()


class WatchedNodes:
    def __init__(self, client: KazooClient) -> None:
        self.client = client
        self._known: dict[str, tuple[bytes | None, int]] = {}
        # Bumped by every invalidation: a read that raced one must not keep its answer.
        self._generation = 0
        client.add_listener(self._on_state)

    def _on_state(self, _state) -> None:
        self._generation += 1
        self._known.clear()

    def _forget(self, event) -> None:
        self.forget(event.path)

    def forget(self, path: str) -> None:
        """Read ``path`` afresh next time: this process just wrote it, and its watch event
        comes later, on kazoo's event thread."""
        self._generation += 1
        self._known.pop(path, None)

    def get(self, path: str) -> tuple[bytes | None, int]:
        """The node's data and version; ``(None, -1)`` when there is none."""
        known = self._known.get(path)
        if known is not None and self.client.connected:
            return known
        generation = self._generation
        try:
            data, stat = self.client.get(path, watch=self._forget)
            value: tuple[bytes | None, int] = (data, stat.version)
        except NoNodeError:
            # A watch on its creation; a node created in between is read as it is.
            stat = self.client.exists(path, watch=self._forget)
            value = (None, -1) if stat is None else (self.client.get(path)[0], stat.version)
        if generation == self._generation:
            self._known[path] = value
        return value


def watched(client: KazooClient) -> WatchedNodes:
    """The nodes of this client (one set of watches per client, however many share it)."""
    with _guard:
        nodes = getattr(client, "_mq_breaker_nodes", None)
        if nodes is None:
            nodes = WatchedNodes(client)
            client._mq_breaker_nodes = nodes
        return nodes
