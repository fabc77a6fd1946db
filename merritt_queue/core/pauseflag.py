"""The queue-paused flag (``/locks/queue/ingest``), cached per client and kept by a watch.

A worker asks before every step; reading the node each time costs a round trip per step.
The cached answer is dropped when the node's watch fires and on every change of the
connection's state (a lost session loses its watches), and read again, with a new watch,
on the next question. A pause therefore reaches a worker as soon as ZooKeeper delivers the
watch event: a step that starts in that instant is like a step that started just before
the pause, which the pause lets finish anyway.
"""

from __future__ import annotations

import threading

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from . import tree as t

_guard = threading.Lock()


class PauseFlag:
    def __init__(self, client: KazooClient) -> None:
        self.client = client
        self._value: bool | None = None
        # Bumped by every invalidation: a read that raced one must not cache its answer.
        self._generation = 0
        client.add_listener(self._on_state)

    def forget(self, *_args) -> None:
        """Drop the cached answer. A pause or release written through this client calls it
        at once: the watch event that also would comes later, on kazoo's event thread."""
        self._generation += 1
        self._value = None

    def _on_state(self, _state: KazooState) -> None:
        self.forget()

    def paused(self) -> bool:
        value = self._value
        if value is not None and self.client.connected:
            return value
        generation = self._generation
        value = self.client.exists(t.LOCK_QUEUE_INGEST, watch=self.forget) is not None
        if generation == self._generation:
            self._value = value
        return value


def pause_flag(client: KazooClient) -> PauseFlag:
    """The flag of this client (one watch per client, however many stores share it)."""
    with _guard:
        flag = getattr(client, "_mq_pause_flag", None)
        if flag is None:
            flag = PauseFlag(client)
            client._mq_pause_flag = flag
        return flag
