"""Holds in the store: the queue pause and collection holds (under our names and
Merritt's), and the held items that follow them (``follow_collection_holds``); releasing a
collection's held items on a person's word is ``helditems``."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
)

from .. import tree as t
from ..errors import (
    QueueError,
)
from ..itemkeys import collection_of, profile_of
from ..pauseflag import pause_flag
from ..sides import CREATED_BY, CREATED_BY_KEY, is_ours
from ..states import (
    BatchStatus,
    JobStatus,
)
from .locks import Locks

if TYPE_CHECKING:
    from . import QueueStore


class Holds(Locks):
    """Holds of ``QueueStore``."""

    def _persistent_flag(self, path: str, on: bool, data: bytes = b"") -> bool:
        """Create or delete a persistent flag node; True when this call changed it."""
        self.stats["round_trips"] += 1
        self.stats["writes"] += 1
        try:
            if on:
                self.client.create(path, data)
            else:
                self.client.delete(path)
            return True
        except (NodeExistsError, NoNodeError):  # already in the wanted state
            return False

    def pause_queue(self) -> bool:
        return self._set_paused(True)

    def unpause_queue(self) -> bool:
        return self._set_paused(False)

    def _set_paused(self, on: bool) -> bool:
        try:
            return self._persistent_flag(t.LOCK_QUEUE_INGEST, on)
        finally:
            pause_flag(self.client).forget()

    def queue_paused(self) -> bool:
        return bool(self.engine.exists(t.LOCK_QUEUE_INGEST))

    def hold_collection(self, mnemonic: str, *, by: str = "", reason: str = "") -> bool:
        """Hold a collection under its own name and under each of its profiles' names, the
        lock Merritt's ingest checks; who, why and that this side placed it ride in each
        node's data (MerrittZK ignores it; ``release_collection`` reads it)."""
        data = t.encode_json(
            {"by": by, "reason": reason, "at": t.now(), CREATED_BY_KEY: CREATED_BY}
        )
        changed = False
        for name in self._hold_names(mnemonic):
            changed = self._persistent_flag(t.collection_lock(name), True, data) or changed
        self.changes.changed("collection", mnemonic, None)
        return changed

    def read_collection_hold(self, mnemonic: str) -> dict | None:
        """Who held a collection, why and when ({} when not recorded); None when not held.

        A hold Merritt wrote under one of the collection's profiles counts.
        """
        paths = [t.collection_lock(name) for name in self._hold_names(mnemonic)]
        got = self.engine.get_many(paths)
        for path in paths:
            node = got[path]
            if node is None:
                continue
            try:
                record = t.decode_json(node[0]) or {}
            except ValueError:  # written by another tool: held, details unknown
                return {}
            if not isinstance(record, dict):
                return {}
            record.pop(CREATED_BY_KEY, None)
            return record
        return None

    def release_collection(self, mnemonic: str, *, also_others: bool = False) -> bool:
        """Release the collection's holds this side placed; with ``also_others``, also those
        Merritt's admin (or any other tool) set under the collection's or its profiles' names.

        A hold node is this side's when its data says so (``collection_holds``). Each is
        deleted at the version read, so a hold placed again meanwhile is left in place.
        """
        changed = False
        for name, (ours, version) in self._read_holds(mnemonic).items():
            if not (ours or also_others):
                continue
            self.stats["writes"] += 1
            try:
                self.client.delete(t.collection_lock(name), version=version)
                changed = True
            except (NoNodeError, BadVersionError):  # released or placed again meanwhile
                pass
        self.changes.changed("collection", mnemonic, None)
        return changed

    def collection_holds(self, mnemonic: str) -> dict[str, bool]:
        """The hold nodes of a collection (its own name and its profiles'), each with
        whether this side placed it: Merritt's admin writes no data, and an earlier version
        of this project wrote ``by``/``reason`` without the marker."""
        return {name: ours for name, (ours, _) in self._read_holds(mnemonic).items()}

    def _read_holds(self, mnemonic: str) -> dict[str, tuple[bool, int]]:
        names = self._hold_names(mnemonic)
        got = self.engine.get_many(t.collection_lock(n) for n in names)
        return {
            name: (_placed_here(node[0]), node[1].version)
            for name in names
            if (node := got[t.collection_lock(name)]) is not None
        }

    def is_collection_held(self, mnemonic: str) -> bool:
        return self.read_collection_hold(mnemonic) is not None

    def _hold_names(self, mnemonic: str) -> list[str]:
        """The lock names a hold of ``mnemonic`` is written under: ours, then Merritt's."""
        return [mnemonic, *(p for p in self.profiles.profiles_of(mnemonic) if p != mnemonic)]

    def item_hold(self, data: dict | None) -> str | None:
        """Why a job or batch (its configuration or submission) is held by a collection
        hold, in words for its message; None when it is not.

        Every Pending job and batch asks, and holds are rare: one listing of the holds
        answers, and the profile table is asked only when some hold's name needs it.
        """
        held = set(self.held_collections())
        if not held:
            return None
        collection = collection_of(data, self.profiles)
        if collection and (collection in held or not held.isdisjoint(self._hold_names(collection))):
            return f"collection {collection} is on hold"
        profile = profile_of(data)
        if profile and profile != collection and profile in held:
            return f"profile {profile} is on hold (a collection hold set in Merritt)"
        return None

    def item_collection(self, data: dict | None) -> str:
        """The collection of a job or batch written by either side ("" when unknown)."""
        return collection_of(data, self.profiles)

    def held_collections(self) -> list[str]:
        return sorted(self.engine.children(t.LOCK_COLLECTIONS))

    def follow_collection_holds(self) -> tuple[list[str], list[str]]:
        """Move batches and jobs with the collection holds, whoever placed or lifted them;
        the ids held and the ids released.

        - A Held batch or job that a collection hold moved to Held (its message is
          ``item_hold``'s) goes back to Pending once no hold covers it: Merritt's admin
          lifting its lock releases what its lock held here. One a person held stays.
        - A Pending batch submitted here that a hold covers is moved to Held at once, with
          the hold's message, as our pickup would. Merritt's own batches are left to its
          ingest, which checks holds on their jobs.

        Each move is its own version-checked multi; one refused (the item moved, or someone
        holds its lock) is left for the next call.
        """
        store = cast("QueueStore", self)  # the batch moves live in another part of it
        held_now: list[str] = []
        released: list[str] = []
        statuses = self.batch_statuses()
        by_hold = [
            b
            for b, st in statuses.items()
            if st.get("status") == BatchStatus.HELD and held_by_a_hold(st.get("message") or "")
        ]
        covered = bool(self.held_collections())
        pending = [b for b, st in statuses.items() if st.get("status") == BatchStatus.PENDING]
        submissions = store.batch_submissions(by_hold + (pending if covered else []))
        for bid in by_hold:
            if self.item_hold(submissions[bid]) is None:
                self._follow(released, bid, lambda b: self.release_batch(b, HOLD_LIFTED))
        for bid in pending if covered else []:
            submission = submissions[bid]
            if is_ours(submission) and (why := self.item_hold(submission)):
                self._follow(
                    held_now,
                    bid,
                    lambda b, why=why: store.hold_batch(b, why),
                )
        for _, jid in self.jobs_in_state(JobStatus.HELD):
            try:
                job = self.get_job(jid)
            except QueueError:
                continue
            if held_by_a_hold(job.message or "") and self.item_hold(job.configuration) is None:
                self._follow(released, jid, lambda j: self.release_job(j, HOLD_LIFTED))
        return held_now, released

    @staticmethod
    def _follow(done: list[str], item_id: str, move) -> None:
        try:
            move(item_id)
        except QueueError:  # moved or locked meanwhile: the next call looks again
            return
        done.append(item_id)


# The message of an item released because the collection hold that held it was lifted.
HOLD_LIFTED = "released: the collection hold that held it was lifted"


def _placed_here(data: bytes) -> bool:
    """Whether a collection hold's data is this side's (see ``hold_collection``)."""
    try:
        record = t.decode_json(data)
    except ValueError:
        return False
    if not isinstance(record, dict):
        return False
    return record.get(CREATED_BY_KEY) == CREATED_BY or "by" in record


def held_by_a_hold(message: str) -> bool:
    """Whether an item's message is the one ``item_hold`` gave it when a hold moved it."""
    return message.startswith(("collection ", "profile ")) and " is on hold" in message
