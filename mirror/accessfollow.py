"""The follower's part for the access queues (``mirror.follow.Follower`` holds one).

A queue is read again whole (``mirror.access.refresh``) when a watch says it changed:
its listing (a child watch on ``/access/<queue>``: a request made or removed), the status
node of each request not Completed or Deleted (data watch), and the lock of each such
request or locked one (exists watch). Every watch is one-shot, armed from the queue as
last read and armed again once it fired; nothing lists ``/access`` while nothing changes.
The watches of a request removed, or finished and unlocked, are let go after each read.
As for jobs, the callbacks only record and wake the loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kazoo.client import KazooClient

from merritt_queue.core import access as core
from merritt_queue.core import history

from . import access as mirror_access

FINAL = frozenset({core.AccessStatus.COMPLETED, core.AccessStatus.DELETED})
ACTOR = history.MIRROR_WATCH


class AccessFollow:
    """Which access queues changed since the loop last read them, and their watches."""

    def __init__(self, client: KazooClient, record: Callable[[Callable[[], None]], bool]):
        self.client = client
        self._record = record  # the follower's: run an update under its lock and wake it
        self._lock = threading.Lock()
        self.dirty: set[str] = set(core.QUEUES)
        self._armed: set[str] = set()

    def _event(self, queue: str, path: str | None = None):
        def fired(_event) -> None:
            def update() -> None:
                with self._lock:
                    self.dirty.add(queue)
                    if path is not None:
                        self._armed.discard(path)

            self._record(update)

        return fired

    def forget_watches(self) -> None:
        """The connection dropped kazoo's watches: arm them all again, read every queue."""
        with self._lock:
            self._armed.clear()
            self.dirty.update(core.QUEUES)

    def step(self) -> int:
        """Read the changed queues again and mirror them; the requests applied."""
        with self._lock:
            due, self.dirty = self.dirty, set()
        if not due:
            return 0
        try:
            self._arm_listings(due)
            items = core.read_queues(self.client, sorted(due))
            applied = mirror_access.apply(items, listed=sorted(due), actor=ACTOR)
            self._arm(items)
            self._drop(due, items)
        except Exception:
            with self._lock:
                self.dirty |= due
            raise
        return len(applied.added) + len(applied.changed) + len(applied.removed)

    def _arm_listings(self, queues: set[str]) -> None:
        """Arm each queue's listing watch before the queue is read, so nothing made after
        the read is missed; once only until it fires (a watch still armed fires anyway)."""
        with self._lock:
            new = [q for q in sorted(queues) if core.paths.queue_dir(q) not in self._armed]
            self._armed.update(core.paths.queue_dir(q) for q in new)
        dirs = {q: core.paths.queue_dir(q) for q in new}
        pending = [
            (q, self.client.get_children_async(d, self._event(q, d))) for q, d in dirs.items()
        ]
        for queue, result in pending:
            try:
                result.get()
            except Exception:  # not armed (the queue is missing?): try again next read
                with self._lock:
                    self._armed.discard(core.paths.queue_dir(queue))

    def _arm(self, items: list[core.AccessItem]) -> None:
        """Arm the watches not yet armed. A node that changed between the read and the
        arming would never fire: what the arming sees is compared with the read, and a
        difference has the queue read again."""
        wanted = {}
        for item in items:
            if item.status in FINAL and not item.locked:
                continue
            status = core.paths.node(item.queue, item.qid, core.paths.STATUS)
            lock = core.paths.node(item.queue, item.qid, core.paths.LOCK)
            wanted[status] = (item.queue, item.status_version)
            wanted[lock] = (item.queue, item.locked)
        with self._lock:
            new = [path for path in wanted if path not in self._armed]
            self._armed.update(new)
        pending = [
            (path, self.client.exists_async(path, watch=self._event(wanted[path][0], path)))
            for path in new
        ]
        stale = set()
        for path, result in pending:
            queue, expected = wanted[path]
            try:
                stat = result.get()
            except Exception:  # not armed: arm it with the next read
                with self._lock:
                    self._armed.discard(path)
                stale.add(queue)
                continue
            if path.endswith("/lock"):
                seen: object = stat is not None
            else:
                seen = stat.version if stat is not None else -1
            if seen != expected:
                stale.add(queue)
        if stale:
            self._record(lambda: self._mark(stale))

    def _drop(self, queues: set[str], items: list[core.AccessItem]) -> None:
        """Let go of the watches of requests no longer watched, in the queues just read: a
        request removed, or finished and unlocked. A watch on a node that will never
        change (the lock of a request gone) would never fire, and be kept for ever: kazoo
        is told to forget it, so the next connection does not set it on the server again."""
        kept = {
            core.paths.node(i.queue, i.qid, part)
            for i in items
            if not (i.status in FINAL and not i.locked)
            for part in (core.paths.STATUS, core.paths.LOCK)
        }
        dirs = tuple(core.paths.queue_dir(q) + "/" for q in queues)
        with self._lock:
            gone = {p for p in self._armed if p.startswith(dirs) and p not in kept}
            self._armed -= gone
        chroot = self.client.chroot or ""
        for path in gone:
            self.client._data_watchers.pop(chroot + path, None)

    def _mark(self, queues: set[str]) -> None:
        with self._lock:
            self.dirty |= queues
