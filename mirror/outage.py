"""Telling of a mirror write that failed because ZooKeeper or the database went away.

Every write of an outage fails alike: a lost connection is told once, as a warning naming
what repairs the mirror, then quietly until a write works again; anything else (a bug, bad
data) is the error with its traceback that it is.
"""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError, connection

from merritt_queue.core.errors import ZooKeeperUnreachable
from merritt_queue.core.reasons import describe
from merritt_queue.core.store.engine import CONNECTION_ERRORS


class OutageReport:
    """The log lines of ``what`` (e.g. "mirror write-through") through outages; ``repair``
    says what brings the mirror up to date afterwards."""

    def __init__(self, log: logging.Logger, what: str, repair: str) -> None:
        self.log, self.what, self.repair = log, what, repair
        self.away = False  # a lost connection told of, and nothing has worked since

    def failed(self, e: Exception, *error: object) -> None:
        lost = lost_connection(e)
        if lost is None:
            self.log.exception(*error)
        elif self.away:
            self.log.debug("%s still paused: %s", self.what, lost)
        else:
            self.away = True
            self.log.warning("%s paused: %s. %s", self.what, lost, self.repair)

    def worked(self) -> None:
        if self.away:
            self.away = False
            self.log.info("%s working again", self.what)


def lost_connection(e: Exception) -> str | None:
    """What was lost, when ``e`` is a lost connection to ZooKeeper or the database; None for
    anything else, which must show as an error."""
    if isinstance(e, (*CONNECTION_ERRORS, ZooKeeperUnreachable)):
        return describe(e)
    if isinstance(e, InterfaceError) or (isinstance(e, OperationalError) and not _usable()):
        return f"the connection to the database was lost ({describe(e)})"
    return None


def _usable() -> bool:
    # An OperationalError on a connection that still answers is no outage ("no such table").
    try:
        return connection.is_usable()
    except Exception:  # the check itself could not reach the server
        return False
