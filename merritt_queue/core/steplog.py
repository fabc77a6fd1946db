"""What one attempt at a job's step did, as the adapters and handlers tell it.

Each attempt carries a ``StepLog`` (``attempt.Attempt.log``); while the runner runs the
attempt's handler, ``note`` appends to it. An adapter (a fetch, a storage call, a minted
ARK) calls ``note`` and never knows where the entry goes: outside an attempt (a test, a
benchmark, the door's own fetch of a manifest) it goes nowhere.

Guarantees:

- Bounded while it is written: at most ``MAX_ENTRIES`` entries an attempt, the rest only
  counted (``more``); each text cut to ``MAX_TEXT`` characters, each list to ``MAX_NAMES``
  items. A step that downloads thousands of files cannot grow it past a few tens of KB.
- Safe to append from several threads (a fetch's pool): one lock, held for an append.
- Never raises into the adapter: an entry that cannot be kept is dropped, counted.

Threads: the contextvar that names the current log is not inherited by a new thread; a
pool whose calls should record submits them through ``contextvars.copy_context().run``.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MAX_ENTRIES = 60
MAX_TEXT = 300
MAX_NAMES = 20


class StepLog:
    """The entries one attempt made, in the order they were made."""

    def __init__(self) -> None:
        self._entries: list[dict[str, Any]] = []
        self.more = 0
        self._lock = threading.Lock()

    def add(self, kind: str, **fields: Any) -> None:
        try:
            entry = {"k": kind[:40], **{k: bounded(v) for k, v in fields.items() if v is not None}}
        except Exception:  # a value no JSON can hold: the entry is lost, never the step
            entry = None
        with self._lock:
            if entry is not None and len(self._entries) < MAX_ENTRIES:
                self._entries.append(entry)
            else:
                self.more += 1

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._entries)


def bounded(value: Any) -> Any:
    """``value`` as JSON holds it, within the text and list bounds."""
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"
    if isinstance(value, dict):
        return {str(k)[:MAX_TEXT]: bounded(v) for k, v in list(value.items())[:MAX_NAMES]}
    if isinstance(value, list | tuple):
        return [bounded(v) for v in list(value)[:MAX_NAMES]]
    return bounded(str(value))


def excerpt(body: bytes | str | None, limit: int = 200) -> str:
    """The start of a service's answer, one line, for a step's record."""
    if body is None:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_current: contextvars.ContextVar[StepLog | None] = contextvars.ContextVar(
    "merritt_queue_step_log", default=None
)


def note(kind: str, **fields: Any) -> None:
    """Add an entry to the current attempt's log, if there is one (see the module)."""
    log = _current.get()
    if log is not None:
        log.add(kind, **fields)


@contextmanager
def recording(log: StepLog) -> Iterator[StepLog]:
    """Make ``log`` the one ``note`` appends to while a handler runs."""
    reset = _current.set(log)
    try:
        yield log
    finally:
        _current.reset(reset)
