"""The queue pause: Merritt's ``/locks/queue/ingest`` flag, which stops every pickup.

Guarantee: pausing and unpausing are idempotent (True only when the call changed it), and
this process's cached answer (``pauseflag``) is forgotten with each change.
"""

from __future__ import annotations

from .. import tree as t
from ..pauseflag import pause_flag
from .shared import Shared


class Pause:
    """Pausing and unpausing the queue."""

    def __init__(self, shared: Shared):
        self.client = shared.client
        self.engine = shared.engine
        self.reads = shared.reads

    def pause_queue(self) -> bool:
        return self._set_paused(True)

    def unpause_queue(self) -> bool:
        return self._set_paused(False)

    def _set_paused(self, on: bool) -> bool:
        try:
            return self.engine.flag(t.LOCK_QUEUE_INGEST, on)
        finally:
            pause_flag(self.client).forget()

    def queue_paused(self) -> bool:
        return bool(self.reads.exists(t.LOCK_QUEUE_INGEST))
