"""The session's ephemeral locks: taken, dropped only while still this session's, and
released once ZooKeeper answers again when an outage kept them from being dropped.

Guarantees:

- A lock is an ephemeral node: it vanishes with its holder's session. ``check`` refuses
  (``LockLost``) a record whose lock was taken by a session that has since ended, so a
  step abandoned by an expired session never commits.
- ``unlock`` deletes only a lock this session holds: after a force-fail and a resume,
  another worker may hold a new lock on the same path.
- A lock whose create or delete got no answer is remembered (an *orphan*) and released
  on the next reconnection, or before this session takes it again.
"""

from __future__ import annotations

import threading
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..errors import LockLost
from .engine import CONNECTION_ERRORS, Engine, log

# What became of a lock an outage kept this session from releasing, once ZooKeeper answers:
# after a long outage the session has usually ended, and its locks with it.
RELEASE_NEWS = {
    "released": "released %s, left behind by a ZooKeeper outage",
    "gone": "%s, left behind by a ZooKeeper outage, is gone already (its session ended, "
    "or it was released meanwhile): nothing released",
    "another's": "%s, left behind by a ZooKeeper outage, is another session's lock now: "
    "left alone, nothing released",
}


class SessionLocks:
    """Ephemeral locks of one client's session, and the orphans an outage left."""

    def __init__(self, client: KazooClient, engine: Engine):
        self.client = client
        self.engine = engine
        self.stats = engine.stats
        # Locks this session holds but could not release while ZooKeeper was away.
        self.orphaned: set[str] = set()
        self._orphan_guard = threading.Lock()
        self._watching_state = False

    @property
    def session_id(self) -> int | None:
        cid = self.client.client_id
        return cid[0] if cid else None

    def check(self, record: Any, what: str) -> None:
        """Refuse a commit under a lock taken by a session that has ended since."""
        if record.lock_session is not None and record.lock_session != self.session_id:
            raise LockLost(
                f"{what}: the ZooKeeper session that took the lock has ended; "
                "the step is abandoned without committing and will run again"
            )

    def try_lock(self, path: str) -> bool:
        return self.taken(path, self.send(path))

    def send(self, path: str) -> Any:
        """The lock's create, sent; ``taken`` waits for its answer (a read may go out
        behind it meanwhile)."""
        if path in self.orphaned:  # ours from before an outage: free it, then take it anew
            self.release_orphaned_locks()
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        return self.engine.create_node_async(path, ephemeral=True)

    def taken(self, path: str, sent: Any) -> bool:
        try:
            sent.get()
            return True
        except NodeExistsError:  # someone else holds it: normal, try the next item
            return False
        except NoNodeError:  # the item was removed since it was listed
            return False
        except CONNECTION_ERRORS:
            # The create may have been applied with its answer lost: if so the lock is
            # ours and nobody else's, so it must go once ZooKeeper answers.
            self.orphan(path)
            raise

    def unlock(self, path: str) -> None:
        """Drop a lock this session holds; another session's lock is left alone. When
        ZooKeeper does not answer, the lock is released once it does (see ``orphan``)."""
        self.stats["round_trips"] += 2
        self.stats["writes"] += 1
        try:
            self.delete_own(path)
        except CONNECTION_ERRORS:
            self.orphan(path)

    def unlock_after(self, path: str, seconds: float) -> None:
        """``unlock`` once ``seconds`` have passed, on a timer thread: the caller goes on."""
        timer = threading.Timer(seconds, self._unlock_quietly, (path,))
        timer.daemon = True
        timer.start()

    def _unlock_quietly(self, path: str) -> None:
        try:
            self.unlock(path)
        except Exception:  # the client closed meanwhile: its session, and the lock, are gone
            log.debug("delayed release of %s not made", path, exc_info=True)

    def delete_own(self, path: str) -> str:
        """Delete ``path`` if this session holds it; what happened (``RELEASE_NEWS``)."""
        stat = self.client.exists(path)
        if stat is None:
            return "gone"
        if stat.ephemeralOwner != self.session_id:
            return "another's"
        try:
            self.client.delete(path, version=stat.version)
        except (NoNodeError, BadVersionError):  # released meanwhile (force-fail, repair)
            return "gone"
        return "released"

    def orphan(self, path: str) -> None:
        """Remember a lock to release when the connection is back.

        A session can outlive an outage (ZooKeeper restarted and restored it, or the
        client reconnected in time): a lock it failed to drop would then keep its item
        from every worker for as long as this process lives.
        """
        log.warning("could not release %s: ZooKeeper did not answer; releasing it later", path)
        with self._orphan_guard:
            self.orphaned.add(path)
            if not self._watching_state:
                self._watching_state = True
                self.client.add_listener(self._on_state)

    def _on_state(self, state: str) -> bool:
        # Runs on kazoo's connection thread, which must not block: release elsewhere.
        if state == KazooState.CONNECTED and self.orphaned:
            self.client.handler.spawn(self.release_orphaned_locks)
        return False

    def release_orphaned_locks(self) -> int:
        """Release the locks left by an outage (those still ours); how many were handled."""
        with self._orphan_guard:
            paths = sorted(self.orphaned)
        handled = 0
        for path in paths:
            try:
                done = self.delete_own(path)
            except CONNECTION_ERRORS:
                break  # still away: the next reconnection tries again
            with self._orphan_guard:
                self.orphaned.discard(path)
            handled += 1
            log.info(RELEASE_NEWS[done], path)
        return handled
