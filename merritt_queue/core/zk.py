"""One started KazooClient per process, created lazily, never shared across fork().

kazoo's client owns threads and a socket; a forked child that reuses its
parent's client corrupts both sessions (kazoo issue 728), so the accessor keys
the client by pid and a child simply builds its own.
"""

from __future__ import annotations

import logging
import os
import selectors
import threading
from dataclasses import dataclass

from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import selector_select
from kazoo.retry import KazooRetry

log = logging.getLogger(__name__)


class _PollSelectors:
    """What kazoo's ``selector_select`` takes of the ``selectors`` module, with poll(2)."""

    EVENT_READ = selectors.EVENT_READ
    EVENT_WRITE = selectors.EVENT_WRITE
    DefaultSelector = getattr(selectors, "PollSelector", selectors.DefaultSelector)


class PollingHandler(SequentialThreadingHandler):
    """kazoo's threading handler, its connection thread waiting with poll(2).

    That thread waits on its sockets before every request it sends and every answer it
    reads, each time through a new selector: Linux's default, epoll, costs four system
    calls more per wait (create, register twice, close) than poll, which, like it, takes
    any descriptor number (``select`` stops at 1024).
    """

    def select(self, *args, **kwargs):
        return selector_select(*args, selectors_module=_PollSelectors, **kwargs)


@dataclass(frozen=True)
class ZkConfig:
    hosts: str = "127.0.0.1:2181"
    chroot: str = ""
    timeout: float = 10.0

    @property
    def chroot_path(self) -> str:
        return self.chroot.rstrip("/")


def connect(config: ZkConfig) -> KazooClient:
    """Start a client whose paths are relative to ``config.chroot`` (created if missing)."""
    retry = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 2}
    client = KazooClient(
        hosts=config.hosts,
        timeout=config.timeout,
        handler=PollingHandler(),
        connection_retry=retry,
        # Our code never calls client.retry, but kazoo's ChildrenWatch (dispatcher, follower)
        # re-reads each listing through it, in a watch callback on kazoo's one event thread.
        # kazoo's default retries without end, up to an hour apart, holding every other watch
        # meanwhile; a few quick tries suffice, since a watch whose read failed is read again
        # once the connection is back (allow_session_lost).
        command_retry=KazooRetry(max_tries=3, delay=0.05, max_delay=1),
    )
    client.start(timeout=config.timeout)
    if config.chroot_path:
        client.ensure_path(config.chroot_path)
        # kazoo applies the chroot per request, so setting it after ensure_path is safe.
        client.chroot = config.chroot_path
    return client


class ClientHolder:
    """Holds this process's client for one configuration."""

    def __init__(self, config: ZkConfig):
        self.config = config
        self._client: KazooClient | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    def get(self) -> KazooClient:
        with self._lock:
            if self._client is None or self._pid != os.getpid():
                self._client = connect(self.config)
                self._pid = os.getpid()
            return self._client

    def peek(self) -> KazooClient | None:
        """This process's client if it has one, without making one."""
        client, pid = self._client, self._pid
        return client if pid == os.getpid() else None

    def close(self) -> None:
        with self._lock:
            if self._client is not None and self._pid == os.getpid():
                try:
                    self._client.stop()
                    self._client.close()
                except Exception:  # closing a dead connection must not mask the caller's error
                    log.exception("closing the ZooKeeper client failed")
            self._client = None
            self._pid = None


def wait_connected(client: KazooClient, timeout: float) -> bool:
    """Whether ``client`` is connected, waiting up to ``timeout`` seconds for it.

    kazoo queues a request made while it reconnects and waits for the server without a
    limit; a caller that must answer within a bound (a web request) asks this first.
    """
    if client.connected:
        return True
    event = threading.Event()

    def listener(state) -> bool:
        if state == KazooState.CONNECTED:
            event.set()
            return True  # kazoo removes a listener that returns True
        return False

    client.add_listener(listener)
    try:
        return client.connected or event.wait(timeout)
    finally:
        client.remove_listener(listener)
