"""Telling listeners (the mirror's write-through) what the store wrote, and as whom.

One store serves every thread of a process, so who is writing and whether changes are
held back are per thread or task (context variables), over a process default.

Guarantee: every write is told once, after it is in ZooKeeper, with the actor of the thread
that wrote it; a failing listener never fails or undoes the write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..changebuffer import ChangeBuffer
from ..records import Change, ChangeKind

log = logging.getLogger("merritt_queue.core.store")

Listener = Callable[[Change], Any]


class Changes:
    """The listeners of one store, the actor written with each change, and deferral."""

    def __init__(self, actor: str = "", listeners: list[Listener] | None = None):
        self.listeners: list[Listener] = list(listeners or [])
        # Who is writing ("worker", "admin:<user>"): the process's default, which a
        # thread or task may override for a block (``acting_as``), never beyond it: a
        # request thread serves many people in turn.
        self.default_actor = actor
        self._acting: ContextVar[str | None] = ContextVar(f"actor-{id(self)}", default=None)
        self._deferred: ContextVar[ChangeBuffer | None] = ContextVar(
            f"deferred-{id(self)}", default=None
        )

    @property
    def actor(self) -> str:
        acting = self._acting.get()
        return self.default_actor if acting is None else acting

    @contextmanager
    def acting_as(self, actor: str) -> Iterator[None]:
        token = self._acting.set(actor)
        try:
            yield
        finally:
            self._acting.reset(token)

    def changed(
        self,
        kind: str,
        item_id: str,
        old_status: str | None,
        record: Any = None,
        removed: bool = False,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Tell the listeners; a failing listener must never fail or undo the write."""
        if not self.listeners:
            return
        change = Change(ChangeKind(kind), item_id, old_status, record, removed, self.actor, data)
        deferred = self._deferred.get()
        if deferred is not None:
            deferred.add(change)
            return
        self.tell([change])

    def tell(self, changes: list[Change]) -> None:
        for listener in self.listeners:
            many = getattr(listener, "many", None)
            if many is not None and len(changes) > 1:
                try:
                    many(changes)
                except Exception:
                    log.exception("change listener failed for %d changes", len(changes))
                continue
            for change in changes:
                try:
                    listener(change)
                except Exception:
                    log.exception("change listener failed for %s %s", change.kind, change.id)

    @contextmanager
    def deferred(self, max_delay: float | None = None) -> Iterator[None]:
        """Hold the listeners' calls until the block ends, then give them all at once.

        For bulk writes and chained steps: a listener with a ``many`` attribute (the
        mirror) then writes them in one database transaction instead of one per item.
        With ``max_delay``, no change waits longer than that many seconds (see
        ``changebuffer``); ``max_delay=0`` holds nothing back.
        """
        if max_delay == 0 or self._deferred.get() is not None:
            yield  # nested: the outer block tells
            return
        buffer = ChangeBuffer(self.tell, max_delay)
        token = self._deferred.set(buffer)
        try:
            yield
        finally:
            self._deferred.reset(token)
            buffer.close()
