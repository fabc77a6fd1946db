"""A deadline on every web request's wait for ZooKeeper.

kazoo's calls wait for an answer without a limit, and a request made while the connection
is down is kept queued and sent when the connection comes back, however late: a page would
hang, and an action confirmed while ZooKeeper was away would be carried out long after the
person left.

Guarantees:

- Within a request, ``runtime.get_store`` waits for a connection until the request's
  deadline, ``MQ_WEB_ZK_WAIT`` seconds after its start (or ``runtime.LATE_GRACE`` once it
  has passed), then raises ``ZooKeeperUnreachable`` having sent nothing.
- A request still running ``MQ_WEB_ZK_WAIT`` seconds after its start while this process's
  client is not connected (the connection dropped after the store was handed out) has that
  client stopped by the watchdog: every ZooKeeper request the client holds, queued or sent
  without an answer, fails at once with ``ConnectionLoss`` and none is sent later; the next
  request starts a new client. Any other request of the process waiting on that client
  fails with it, as it would have waited for the same server.
- A request whose client stays connected is never cut, however long it takes.
- An unreachable ZooKeeper that reaches this middleware as an exception is answered with a
  503 page saying so, that nothing was changed, and to try again.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time

from django.conf import settings
from django.shortcuts import render
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from merritt_queue.core.errors import ZooKeeperUnreachable

from . import runtime

log = logging.getLogger(__name__)

# What a request meets when ZooKeeper is away: the deadline's own error, or what kazoo raises
# for the requests of a client that lost its connection or was stopped.
UNREACHABLE = (
    ZooKeeperUnreachable,
    ConnectionLoss,
    ConnectionClosedError,
    SessionExpiredError,
    KazooTimeoutError,
)

# How often the watchdog looks at the requests in flight, in seconds.
TICK = 0.1


class Watchdog:
    """The requests in flight in this process (start times), and a thread that stops the
    process's client once one of them has waited past the deadline while it is not
    connected."""

    def __init__(self) -> None:
        self._started: dict[int, float] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._pid: int | None = None

    def enter(self) -> int:
        with self._lock:
            if self._pid != os.getpid():  # a forked child inherits no thread
                self._pid = os.getpid()
                self._started.clear()
                threading.Thread(target=self._watch, name="mq-zk-deadline", daemon=True).start()
            key = next(self._ids)
            self._started[key] = time.monotonic()
            return key

    def leave(self, key: int) -> None:
        with self._lock:
            self._started.pop(key, None)

    def _oldest(self) -> float | None:
        with self._lock:
            return min(self._started.values(), default=None)

    def _watch(self) -> None:
        while True:
            time.sleep(TICK)
            oldest = self._oldest()
            if oldest is None or time.monotonic() - oldest < settings.MQ_WEB_ZK_WAIT:
                continue
            try:
                if runtime.abandon_if_disconnected():
                    log.warning(
                        "ZooKeeper not reachable for a request past MQ_WEB_ZK_WAIT=%gs: "
                        "the client was stopped, its waiting requests failed, not kept",
                        settings.MQ_WEB_ZK_WAIT,
                    )
            except Exception:  # the watchdog must outlive any one failure
                log.exception("the ZooKeeper deadline's watchdog failed")


_watchdog = Watchdog()


class ZkDeadlineMiddleware:
    """Early in settings.MIDDLEWARE: the deadline covers every view and what it calls."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        key = _watchdog.enter()
        runtime.set_deadline(time.monotonic() + settings.MQ_WEB_ZK_WAIT)
        try:
            return self.get_response(request)
        finally:
            runtime.set_deadline(None)
            _watchdog.leave(key)

    def process_exception(self, request, exception):
        if not isinstance(exception, UNREACHABLE):
            return None
        message = (
            str(exception)
            if isinstance(exception, ZooKeeperUnreachable)
            else runtime.unreachable(settings.ZK_HOSTS, settings.MQ_WEB_ZK_WAIT)
        )
        return unreachable_page(request, message)


def unreachable_page(request, message: str):
    return render(request, "zk_unreachable.html", {"message": message}, status=503)
