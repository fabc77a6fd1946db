"""One started KazooClient per process, created lazily, never shared across fork().

kazoo's client owns threads and a socket; a forked child that reuses its
parent's client corrupts both sessions (kazoo issue 728), so the accessor keys
the client by pid and a child simply builds its own.
"""

from __future__ import annotations

import logging
import math
import os
import select
import threading
from dataclasses import dataclass

from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd, selector_select
from kazoo.retry import KazooRetry

log = logging.getLogger(__name__)


class PollingHandler(SequentialThreadingHandler):
    """kazoo's threading handler, its connection thread waiting with poll(2).

    That thread waits on its sockets several times per request (before sending, before
    each read of an answer), each time through a new selector from kazoo's
    ``selector_select``: with Linux's default, epoll, four system calls more per wait than
    poll, and with either, the ``selectors`` module's bookkeeping, which costs that thread
    more than the request itself. ``poll_select`` answers as ``selector_select`` does.
    """

    def select(self, *args, **kwargs):
        return poll_select(*args, **kwargs) if _HAS_POLL else selector_select(*args, **kwargs)


_HAS_POLL = hasattr(select, "poll")
_READ, _WRITE = getattr(select, "POLLIN", 1), getattr(select, "POLLOUT", 4)


def poll_select(rlist, wlist, xlist, timeout=None):
    """kazoo's ``selector_select`` (which copies ``select.select``'s signature), one
    poll(2) object and no ``selectors`` bookkeeping: the same answers, the same refusals.

    Like it, an error or hang-up on a descriptor counts as ready for what was asked of it,
    a descriptor asked for both is reported readable only, and ``xlist`` is never
    reported.
    """
    if timeout is not None:
        if not isinstance(timeout, int | float):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    wanted: dict[int, int] = {}
    objects: dict[int, list] = {}
    for mask, fileobjs in ((_READ, rlist), (_WRITE, wlist)):
        for fileobj in fileobjs:
            fd = fileobj_to_fd(fileobj)
            wanted[fd] = wanted.get(fd, 0) | mask
            objects.setdefault(fd, []).append(fileobj)
    poller = select.poll()
    for fd, mask in wanted.items():
        try:
            poller.register(fd, mask)
        except (ValueError, OSError) as e:
            raise ValueError("Invalid event mask or fd") from e
    # poll(2) counts milliseconds: rounded up, so that a wait is never shorter than asked.
    ms = None if timeout is None else (0 if timeout <= 0 else math.ceil(timeout * 1e3))
    try:
        ready = poller.poll(ms)
    except InterruptedError:
        ready = []
    readable: list = []
    writable: list = []
    for fd, event in ready:
        seen = (_WRITE if event & ~_READ else 0) | (_READ if event & ~_WRITE else 0)
        seen &= wanted.get(fd, 0)
        if seen & _READ:
            readable.extend(objects[fd])
        elif seen & _WRITE:
            writable.extend(objects[fd])
    return readable, writable, []


@dataclass(frozen=True)
class ZkConfig:
    hosts: str = "127.0.0.1:2181"
    chroot: str = ""
    timeout: float = 10.0

    @property
    def chroot_path(self) -> str:
        return self.chroot.rstrip("/")


def connect(config: ZkConfig, start_timeout: float | None = None) -> KazooClient:
    """Start a client whose paths are relative to ``config.chroot`` (created if missing),
    waiting at most ``start_timeout`` seconds for it (``config.timeout`` by default)."""
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
    client.start(timeout=config.timeout if start_timeout is None else start_timeout)
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

    def get(self, start_timeout: float | None = None) -> KazooClient:
        """This process's client, started (within ``start_timeout`` seconds) if it has none."""
        with self._lock:
            if self._client is None or self._pid != os.getpid():
                self._client = connect(self.config, start_timeout)
                self._pid = os.getpid()
            return self._client

    def abandon(self, client: KazooClient) -> bool:
        """Stop ``client`` if it is still this process's and not connected; whether it was.

        kazoo keeps a request made while its connection is down queued, and sends it when the
        connection is back, however late; stopping the client fails every request it holds
        (queued or sent without an answer) with ``ConnectionLoss``, so none of them is sent
        later. The next ``get`` starts a new client.
        """
        with self._lock:
            mine = self._client is not None and self._client is client
            if not mine or self._pid != os.getpid() or client.connected:
                return False
            self._client = None
            self._pid = None
        try:
            client.stop()
            client.close()
        except Exception:  # a dead connection's errors must not keep it from being dropped
            log.exception("stopping the unreachable ZooKeeper client failed")
        return True

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
