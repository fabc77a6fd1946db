"""Turns the ZooKeeper tree into RQ work: watches for speed, a periodic sweep for safety.

Guarantees:

- While ``/locks/queue/ingest`` exists nothing new is enqueued; steps already
  running finish.
- In the ``workers`` mode ``none`` nothing is enqueued (``sides``).
- A watch event makes a sweep of what it marked, at most one sweep per ``settle``; a full
  sweep, the safety net, runs every ``sweep_interval`` whatever the watches heard
  (``sweeps`` for what a sweep enqueues, ``queues`` for the queues and RQ job ids).
- The project's periodic hook is called at start-up and at least every ``tick_interval``;
  a fault in it never stops the dispatching.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch
from redis import Redis
from redis.exceptions import RedisError

from . import tree as t
from . import workerfacts
from .errors import QueueError
from .history import DISPATCHER_PREFIX, process_actor
from .pauseflag import pause_flag
from .queues import JOB_WORK_STATES, DispatcherConfig, Tasks
from .reasons import describe
from .sides import NONE
from .store import QueueStore
from .sweeps import Sweeper

log = logging.getLogger(__name__)


class Dispatcher:
    """Watches the tree and keeps the RQ queues filled from it."""

    def __init__(
        self,
        store: QueueStore,
        redis: Redis,
        tasks: Tasks,
        config: DispatcherConfig | None = None,
        on_tick: Callable[[], float | None] | None = None,
    ):
        self.store = store
        # The project's periodic work (maintenance windows, resume runs, due notifications),
        # called at start-up and at least every ``tick_interval``; it answers how soon it
        # wants to be called again.
        self.on_tick = on_tick
        if not store.changes.actor:  # a store shared with other writers keeps theirs
            store.changes.default_actor = process_actor(DISPATCHER_PREFIX)
        self.redis = redis
        self.tasks = tasks
        self.config = config or DispatcherConfig()
        self.wake = threading.Event()
        self.stop = threading.Event()
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()
        self.sweeper = Sweeper(store, redis, tasks, self.config, self._mark, self.stop)
        # When the last sweep began (``run`` spaces them by ``settle``).
        self._swept = 0.0

    # --- watches: callbacks only mark what changed and wake the loop ----------

    def _mark(self, what: str) -> None:
        with self._dirty_lock:
            self._dirty.add(what)
        self.wake.set()

    def install_watches(self) -> None:
        """Watches on the batches and the pause; the state directories' watches are armed
        by each sweep's own listing (see ``sweep_job_state``)."""
        client = self.store.client
        for status in JOB_WORK_STATES:
            client.ensure_path(t.job_state_dir(status))
        self._watch(t.BATCHES, "batches")
        self._watch(t.LOCK_QUEUE, "all")
        client.ensure_path(t.LOCK_COLLECTIONS)
        self._watch(t.LOCK_COLLECTIONS, "holds")

    def _watch(self, path: str, what: str) -> None:
        # allow_session_lost: keep watching after a session expiry (ZooKeeper restarts).
        ChildrenWatch(self.store.client, path, self._children_cb(what), allow_session_lost=True)

    def _children_cb(self, what: str):
        def callback(_children) -> bool:
            if self.stop.is_set():
                return False
            self._mark(what)
            return True

        return callback

    # --- sweeps ----------------------------------------------------------------

    def _paused(self) -> bool:
        return pause_flag(self.store.client).paused()

    def sweep(self) -> int:
        """Enqueue everything that has work; the number of RQ jobs enqueued."""
        self._swept = time.monotonic()
        # What was marked before now is covered (the watches' first calls, on installing).
        with self._dirty_lock:
            self._dirty.clear()
        self.follow_holds()
        if self.config.workers == NONE or self._paused():
            return 0
        count = sum(self.sweep_job_state(s) for s in JOB_WORK_STATES)
        return count + self.sweep_batches()

    def sweep_dirty(self) -> int:
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        if not dirty:
            return 0
        self._swept = time.monotonic()
        if "all" in dirty:
            return self.sweep()
        if "holds" in dirty:
            self.follow_holds()
        if self.config.workers == NONE or self._paused():
            return 0
        count = sum(self.sweep_job_state(w[4:]) for w in dirty if w.startswith("job:"))
        if "batches" in dirty:
            return count + self.sweep_batches()
        marked = sorted(w[6:] for w in dirty if w.startswith("batch:"))
        return count + (self.sweep_batches(marked) if marked else 0)

    def follow_holds(self) -> None:
        """Held and released items follow the collection holds (``follow_collection_holds``):
        at every full sweep, and when a hold is placed or lifted by either side."""
        try:
            held, released = self.store.held.follow_collection_holds()
        except QueueError as e:
            log.warning("collection holds not followed this time: %s", describe(e))
            return
        if held or released:
            log.info("collection holds: held %s, released %s", held, released)

    def sweep_job_state(self, status: str) -> int:
        return self.sweeper.sweep_job_state(status)

    def sweep_batches(self, bids: list[str] | None = None) -> int:
        return self.sweeper.sweep_batches(bids)

    @property
    def enqueued(self) -> int:
        return self.sweeper.rq.enqueued

    # --- the loop ----------------------------------------------------------------

    def tick(self) -> float:
        """Call the ``on_tick`` hook; the seconds until it is due again.

        Whatever the hook raises is logged and the hook called again soon: a fault in the
        project's periodic work must not stop the dispatching.
        """
        wait = self.config.tick_interval
        if self.on_tick is None:
            return wait
        try:
            asked = self.on_tick()
        except Exception:
            log.exception("dispatcher tick failed, retrying")
            return min(wait, 5.0)
        return wait if asked is None else min(wait, max(asked, 0.0))

    def run(self) -> None:
        """Sweep now, then on every watch event and every ``sweep_interval`` seconds; call
        the tick hook first (a maintenance window on at start-up holds what it holds before
        anything is enqueued), then whenever it is due."""
        self.install_watches()
        next_full = next_tick = 0.0
        while not self.stop.is_set():
            if time.monotonic() >= next_tick:
                next_tick = time.monotonic() + self.tick()
            try:
                if time.monotonic() >= next_full:
                    began = time.monotonic()
                    enqueued = self.sweep()
                    took = time.monotonic() - began
                    # For the Workers page: when the safety net last ran, and how it went.
                    workerfacts.dispatcher_swept(
                        self.redis, socket.gethostname(), os.getpid(), enqueued, took
                    )
                    next_full = time.monotonic() + self.config.sweep_interval
                else:
                    self.sweep_dirty()
            # KazooTimeoutError is not a KazooException: a request made while ZooKeeper is
            # away times out with it, and it must not end the loop.
            except (KazooException, KazooTimeoutError, RedisError, OSError) as e:
                log.warning("dispatch sweep failed, retrying: %s", describe(e))
                next_full = time.monotonic() + 1.0
            self.wake.wait(timeout=max(0.05, min(1.0, next_full - time.monotonic())))
            # At most one sweep per ``settle``: a burst of watch events (a busy queue) makes
            # one sweep, while the first event after a quiet spell (a small deposit on an
            # idle queue) is served at once instead of waiting for a burst that never comes.
            self.stop.wait(max(0.0, self._swept + self.config.settle - time.monotonic()))
            self.wake.clear()
