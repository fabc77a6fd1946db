"""Exceptions told as the reason of a log line, never as an empty one.

kazoo's connection errors carry no message: ``"retrying: %s" % e`` logs "retrying: ", which
tells an operator nothing, and ``%r`` logs ``ConnectionLoss()``, which tells them little.
"""

from __future__ import annotations

from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from .errors import QueueError

# Most specific first: SessionExpiredError is no ConnectionLoss, but keep the order safe.
_SENTENCES: tuple[tuple[type[BaseException], str], ...] = (
    (SessionExpiredError, "the ZooKeeper session expired"),
    (ConnectionLoss, "the connection to ZooKeeper was lost"),
    (ConnectionClosedError, "the connection to ZooKeeper is closed"),
    (OperationTimeoutError, "ZooKeeper did not answer in time"),
    (KazooTimeoutError, "ZooKeeper did not answer in time"),
)


def describe(e: BaseException) -> str:
    """``e`` as a reason: a sentence for a lost ZooKeeper connection, the message of the
    queue's own errors (already written to be read), else the type and the message."""
    message = str(e).strip()
    named = f"{type(e).__name__}: {message}" if message else type(e).__name__
    for kind, sentence in _SENTENCES:
        if isinstance(e, kind):
            return f"{sentence} ({named})"
    if isinstance(e, QueueError) and message:
        return message
    return named if message else f"{named} (no message)"
