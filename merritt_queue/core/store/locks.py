"""Ephemeral and persistent locks: items' locks, the storage, inventory and local-id
locks, and the locks an outage kept this session from releasing (orphans)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from .. import tree as t
from ..attempt import Attempt, ConnectionWatch
from ..errors import LockLost
from ..records import ItemLock, JobRecord
from .base import StoreBase
from .engine import CONNECTION_ERRORS, log

# What became of a lock an outage kept this session from releasing, once ZooKeeper answers:
# after a long outage the session has usually ended, and its locks with it.
_RELEASE_NEWS = {
    "released": "released %s, left behind by a ZooKeeper outage",
    "gone": "%s, left behind by a ZooKeeper outage, is gone already (its session ended, "
    "or it was released meanwhile): nothing released",
    "another's": "%s, left behind by a ZooKeeper outage, is another session's lock now: "
    "left alone, nothing released",
}


class Locks(StoreBase):
    """The locks of ``QueueStore``."""

    # How long a step cut off from ZooKeeper waits for its session to come back before it
    # gives up (``attempt.ConnectionWatch``); the project sets MQ_STEP_CUT_OFF_SECONDS here.
    step_cut_off: float = 10.0

    def __init__(self, client: KazooClient, **kwargs: Any):
        super().__init__(client, **kwargs)
        self._watch: ConnectionWatch | None = None
        # Locks this session holds but could not release while ZooKeeper was away.
        self._orphaned: set[str] = set()
        self._orphan_guard = threading.Lock()
        self._watching_state = False

    @property
    def session_id(self) -> int | None:
        cid = self.client.client_id
        return cid[0] if cid else None

    def begin_attempt(self, job: JobRecord) -> Attempt:
        """The attempt this worker starts at ``job``'s step, which it has just locked."""
        if self._watch is None:
            self._watch = ConnectionWatch(self.client, self.step_cut_off)
        return Attempt.begin(self._watch, job.jid, job.status, job.status_version, job.lock_session)

    def _check_session(self, record: Any, what: str) -> None:
        if record.lock_session is not None and record.lock_session != self.session_id:
            raise LockLost(
                f"{what}: the ZooKeeper session that took the lock has ended; "
                "the step is abandoned without committing and will run again"
            )

    def _try_lock(self, path: str) -> bool:
        return self._lock_taken(path, self._send_lock(path))

    def _send_lock(self, path: str) -> Any:
        """The lock's create, sent; ``_lock_taken`` waits for its answer (a read may go out
        behind it meanwhile)."""
        if path in self._orphaned:  # ours from before an outage: free it, then take it anew
            self.release_orphaned_locks()
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        return self.engine.create_node_async(path, ephemeral=True)

    def _lock_taken(self, path: str, sent: Any) -> bool:
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
            self._orphan(path)
            raise

    def _unlock(self, path: str) -> None:
        """Drop a lock this session holds; another session's lock is left alone.

        After a force-fail and a resume, another worker may hold a new lock on the
        same path: deleting it blindly would let a third worker in beside it. When
        ZooKeeper does not answer, the lock is released once it does (see ``_orphan``).
        """
        self.stats["round_trips"] += 2
        self.stats["writes"] += 1
        try:
            self._delete_own(path)
        except CONNECTION_ERRORS:
            self._orphan(path)

    def _unlock_after(self, path: str, seconds: float) -> None:
        """``_unlock`` once ``seconds`` have passed, on a timer thread: the caller goes on."""
        timer = threading.Timer(seconds, self._unlock_quietly, (path,))
        timer.daemon = True
        timer.start()

    def _unlock_quietly(self, path: str) -> None:
        try:
            self._unlock(path)
        except Exception:  # the client closed meanwhile: its session, and the lock, are gone
            log.debug("delayed release of %s not made", path, exc_info=True)

    def _delete_own(self, path: str) -> str:
        """Delete ``path`` if this session holds it; what happened (``_RELEASE_NEWS``)."""
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

    def _orphan(self, path: str) -> None:
        """Remember a lock to release when the connection is back.

        A session can outlive an outage (ZooKeeper restarted and restored it, or the
        client reconnected in time): a lock it failed to drop would then keep its item
        from every worker for as long as this process lives.
        """
        log.warning("could not release %s: ZooKeeper did not answer; releasing it later", path)
        with self._orphan_guard:
            self._orphaned.add(path)
            if not self._watching_state:
                self._watching_state = True
                self.client.add_listener(self._on_state)

    def _on_state(self, state: str) -> bool:
        # Runs on kazoo's connection thread, which must not block: release elsewhere.
        if state == KazooState.CONNECTED and self._orphaned:
            self.client.handler.spawn(self.release_orphaned_locks)
        return False

    def release_orphaned_locks(self) -> int:
        """Release the locks left by an outage (those still ours); how many were handled."""
        with self._orphan_guard:
            paths = sorted(self._orphaned)
        handled = 0
        for path in paths:
            try:
                done = self._delete_own(path)
            except CONNECTION_ERRORS:
                break  # still away: the next reconnection tries again
            with self._orphan_guard:
                self._orphaned.discard(path)
            handled += 1
            log.info(_RELEASE_NEWS[done], path)
        return handled

    def lock_storage(self, ark: str, owner: str = "") -> ItemLock | None:
        """Take the persistent storage lock of ``ark`` for ``owner`` (a job id); None when
        someone else holds it.

        The lock outlives its holder's session, so it records the owner: an attempt of a
        job whose earlier attempt died while storing takes the lock back. Taking it back
        writes it again (same data, next version), so the lock returned, which names the
        node's creation and version, is this attempt's alone: the older attempt's release
        (``release_lock``) no longer matches it and leaves it in place.
        """
        path = t.storage_lock(ark)
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        try:
            _, stat = self.client.create(path, t.encode_str(owner), include_data=True)
            return ItemLock("storage", ark, owner, stat.czxid, stat.version)
        except NodeExistsError:  # held: ours from an attempt that died, or someone else's
            pass
        if not owner:
            return None
        try:
            data, stat = self.client.get(path)
            if t.decode_str(data) != owner:
                return None
            stat = self.client.set(path, data, version=stat.version)
        except (NoNodeError, BadVersionError):  # released or taken back meanwhile: try later
            return None
        return ItemLock("storage", ark, owner, stat.czxid, stat.version)

    def release_lock(self, lock: ItemLock) -> None:
        """Let go of ``lock`` if it is still this holder's: a step whose commit failed.

        A storage lock is deleted only when it is the very node this attempt took, at the
        version it left it (``lock_storage``): not after a force-fail gave the ARK to
        another job, nor after a newer attempt of the same job took it back. An inventory
        lock is this session's or left alone (``_unlock``).
        """
        if lock.kind == "inventory":
            self._unlock(lock.path)
            return
        self.stats["round_trips"] += 2
        self.stats["writes"] += 1
        try:
            data, stat = self.client.get(lock.path)
            if (t.decode_str(data) or "") != lock.owner or not lock.taken_as(stat):
                log.info("left %s in place: it is no longer this attempt's", lock.path)
                return
            self.client.delete(lock.path, version=stat.version)
        except (NoNodeError, BadVersionError):  # gone, or changed hands meanwhile
            pass

    def lock_inventory(self, ark: str) -> bool:
        return self._try_lock(t.inventory_lock(ark))

    def lock_localid(self, local_id: str) -> bool:
        return self._try_lock(t.localid_lock(local_id))

    def unlock_localid(self, local_id: str) -> None:
        self._unlock(t.localid_lock(local_id))

    def locks(self) -> Iterator[tuple[str, Any]]:
        """Every lock node with its stat: queue, collection, storage, inventory, local id."""
        for parent in (
            t.LOCK_QUEUE,
            t.LOCK_COLLECTIONS,
            t.LOCK_STORAGE,
            t.LOCK_INVENTORY,
            t.LOCK_LOCALID,
        ):
            names = self.engine.children(parent)
            got = self.engine.get_many(f"{parent}/{n}" for n in names)
            for path, node in got.items():
                if node:
                    yield path, node[1]
