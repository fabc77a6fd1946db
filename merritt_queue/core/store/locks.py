"""Item locks besides a job's or a batch's: storage, inventory and local id; the attempt
a worker starts under a job's lock; a listing of every lock.

Guarantee: a storage lock outlives its holder's session and records its owner, and is let
go only by the very attempt that took it (``release_lock``); an inventory or local-id
lock is this session's ephemeral lock (``SessionLocks``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from .. import tree as t
from ..attempt import Attempt, ConnectionWatch
from ..records import ItemLock, JobRecord
from .engine import log
from .shared import Shared


class Locks:
    """Storage, inventory and local-id locks, and a worker's attempt."""

    # How long a step cut off from ZooKeeper waits for its session to come back before it
    # gives up (``attempt.ConnectionWatch``); the project sets MQ_STEP_CUT_OFF_SECONDS here.
    step_cut_off: float = 10.0

    def __init__(self, shared: Shared):
        self.client = shared.client
        self.reads = shared.reads
        self.stats = shared.stats
        self.session = shared.session
        self._watch: ConnectionWatch | None = None

    def begin_attempt(self, job: JobRecord) -> Attempt:
        """The attempt this worker starts at ``job``'s step, which it has just locked."""
        if self._watch is None:
            self._watch = ConnectionWatch(self.client, self.step_cut_off)
        return Attempt.begin(self._watch, job.jid, job.status, job.status_version, job.lock_session)

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
        lock is this session's or left alone (``SessionLocks.unlock``).
        """
        if lock.kind == "inventory":
            self.session.unlock(lock.path)
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
        return self.session.try_lock(t.inventory_lock(ark))

    def lock_localid(self, local_id: str) -> bool:
        return self.session.try_lock(t.localid_lock(local_id))

    def unlock_localid(self, local_id: str) -> None:
        self.session.unlock(t.localid_lock(local_id))

    def nodes(self) -> Iterator[tuple[str, Any]]:
        """Every lock node with its stat: queue, collection, storage, inventory, local id."""
        for parent in (
            t.LOCK_QUEUE,
            t.LOCK_COLLECTIONS,
            t.LOCK_STORAGE,
            t.LOCK_INVENTORY,
            t.LOCK_LOCALID,
        ):
            names = self.reads.children(parent)
            got = self.reads.get_many(f"{parent}/{n}" for n in names)
            for path, node in got.items():
                if node:
                    yield path, node[1]
