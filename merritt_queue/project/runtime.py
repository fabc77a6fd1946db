"""The process's queue store, configured from Django settings, and a bounded Redis
connection for the probes (``/healthz``, ``/metrics``).

This is the only bridge between Django and the queue core: the core modules
take a client or a config and never read settings themselves.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django_rq.connection_utils import get_redis_connection
from kazoo.handlers.threading import KazooTimeoutError

from ..core.errors import ZooKeeperUnreachable
from ..core.store import QueueStore
from ..core.zk import ClientHolder, ZkConfig, wait_connected
from .profiletable import ProfileTable

_holder: ClientHolder | None = None
_initialised: dict[ZkConfig, object] = {}
# The one store over the holder's client: its listeners and its orphaned locks live as
# long as the client does, and a new client (a forked child, a new configuration) gets
# a store of its own.
_store: QueueStore | None = None
_guard = threading.Lock()


def zk_config() -> ZkConfig:
    return ZkConfig(hosts=settings.ZK_HOSTS, chroot=settings.ZK_CHROOT, timeout=settings.ZK_TIMEOUT)


def get_store(*, init: bool = True, connected_within: float | None = None) -> QueueStore:
    """The store over this process's client, the same one at each call; a forked child
    gets a client, and so a store, of its own.

    ``init=False`` for tools that promise not to write (the consistency check).
    ``connected_within``: raise ``ZooKeeperUnreachable`` (a QueueError) unless ZooKeeper
    answers within that many seconds, instead of letting the first request wait for it
    without a limit. Inside a web request (``zkdeadline``) it is at most the time left of
    the request's deadline, and never less than ``LATE_GRACE``: a request past its deadline
    whose client is connected (a long inline action) is served as any other.
    """
    global _holder, _store
    left = deadline_left()
    if left is not None:
        left = max(left, LATE_GRACE)
        connected_within = left if connected_within is None else min(left, connected_within)
    if not _guard.acquire(timeout=-1 if connected_within is None else connected_within):
        raise ZooKeeperUnreachable(unreachable(zk_config().hosts, connected_within or 0))
    try:
        config = zk_config()
        if _holder is None or _holder.config != config:
            if _holder is not None:
                _holder.close()
            _holder = ClientHolder(config)
        try:
            client = _holder.get(start_timeout=connected_within)
        except KazooTimeoutError:
            if connected_within is None:
                raise  # workers and the dispatcher handle it as they always have
            raise ZooKeeperUnreachable(unreachable(config.hosts, connected_within)) from None
        if connected_within is not None and not wait_connected(client, connected_within):
            raise ZooKeeperUnreachable(unreachable(config.hosts, connected_within))
        if _store is None or _store.client is not client:
            _store = _new_store(client)
        store = _store
        if init and client is not _initialised.get(config):
            # A fresh ensemble or chroot has no containers; creating them is idempotent.
            store.init()
            _initialised[config] = client
    finally:
        _guard.release()
    return store


# The least a request waits for the store's lock or a connection, deadline passed or not.
LATE_GRACE = 0.5


def unreachable(hosts: str, seconds: float) -> str:
    return (
        f"ZooKeeper is not reachable ({hosts}, no connection within {seconds:g} s): "
        "nothing was changed; try again once it is back."
    )


# The monotonic time by which this thread's web request gives up on ZooKeeper (zkdeadline).
_request = threading.local()


def set_deadline(at: float | None) -> None:
    _request.deadline = at


def deadline_left() -> float | None:
    """Seconds left of this thread's web request's deadline (at least 0), None outside one."""
    at = getattr(_request, "deadline", None)
    return None if at is None else max(at - time.monotonic(), 0.0)


def abandon_if_disconnected() -> bool:
    """Stop this process's client when it is not connected (``ClientHolder.abandon``), so
    that no request waiting in it is sent later; whether it was stopped."""
    holder = _holder
    client = holder.peek() if holder is not None else None
    return client is not None and holder is not None and holder.abandon(client)


def client_state() -> str | None:
    """This process's client's session state (``CONNECTED``, ``SUSPENDED``, ``LOST``), or
    None when it has none yet; never connects."""
    holder = _holder
    client = holder.peek() if holder is not None else None
    return str(client.state) if client is not None else None


def redis_within(seconds: float):
    """A new connection to the workers' Redis, read from the settings at each call, whose
    connect and every answer are waited for at most ``seconds``: a Redis that accepts the
    connection but never answers must not hold a probe. The caller closes it."""
    conn = get_redis_connection(settings.RQ_QUEUES["default"])
    conn.connection_pool.connection_kwargs.update(
        socket_connect_timeout=seconds, socket_timeout=seconds
    )
    return conn


def _new_store(client) -> QueueStore:
    store = QueueStore(client)
    store.shared.profiles = ProfileTable()
    store.locks.step_cut_off = settings.MQ_STEP_CUT_OFF_SECONDS
    if getattr(settings, "MQ_MIRROR_WRITE_THROUGH", True):
        store.changes.listeners.append(_mirror_listener(store))
    return store


def _mirror_listener(store: QueueStore):
    # Imported here: the core modules never import Django apps; this module is the glue.
    from mirror.facade import make_listener

    return make_listener(store)


def close() -> None:
    global _holder, _store
    with _guard:
        if _holder is not None:
            _holder.close()
        _holder = None
        _store = None
