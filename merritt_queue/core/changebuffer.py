"""Change notices held back from a store's listeners, to be given to them in one call.

The mirror writes one database transaction per call. A worker carrying a job through its
steps makes a dozen writes in a fraction of a second (each step's data nodes and status);
one transaction for all of them costs about what one of them did. Held back without a
bound, though, a long step (a big download) would leave the mirror showing the state
before it for as long as it runs. With ``max_delay``, a thread of this process gives the
listeners whatever has waited that long, whatever the worker's thread is doing.

Order is kept: one flush at a time per buffer, and the changes of each in the order made.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class ChangeBuffer:
    def __init__(self, tell: Callable[[list], None], max_delay: float | None = None) -> None:
        self._tell = tell
        self._max_delay = max_delay
        self._changes: list = []
        self._lock = threading.Lock()  # guards _changes
        self._telling = threading.Lock()  # held while the listeners run

    def add(self, change) -> None:
        with self._lock:
            first = not self._changes
            self._changes.append(change)
        if first and self._max_delay is not None:
            _flusher().schedule(self, self._max_delay)

    def flush(self) -> None:
        """Give the listeners every change held so far (after any flush under way)."""
        with self._telling:
            with self._lock:
                changes, self._changes = self._changes, []
            if changes:
                self._tell(changes)

    def close(self) -> None:
        if self._max_delay is not None:
            _flusher().cancel(self)
        self.flush()


class _Flusher:
    """Flushes each scheduled buffer when its delay is up (one daemon thread)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._cond = threading.Condition()
        self._due: dict[ChangeBuffer, float] = {}
        thread = threading.Thread(target=self._run, name="mq-change-flusher", daemon=True)
        thread.start()

    def schedule(self, buffer: ChangeBuffer, delay: float) -> None:
        with self._cond:
            self._due.setdefault(buffer, time.monotonic() + delay)
            self._cond.notify()

    def cancel(self, buffer: ChangeBuffer) -> None:
        with self._cond:
            self._due.pop(buffer, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                ready = [b for b, at in self._due.items() if at <= now]
                if not ready:
                    self._cond.wait(min(self._due.values()) - now if self._due else None)
                    continue
                for buffer in ready:
                    del self._due[buffer]
            for buffer in ready:
                try:
                    buffer.flush()
                except Exception:  # a listener's failure must not end the thread
                    log.exception("delayed flush of store changes failed")


_instance: _Flusher | None = None
_guard = threading.Lock()


def _flusher() -> _Flusher:
    global _instance
    with _guard:
        # A forked child has the parent's object but not its thread.
        if _instance is None or _instance.pid != os.getpid():
            _instance = _Flusher()
        return _instance
