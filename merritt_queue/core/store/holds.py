"""Collection holds, under our names and Merritt's, and the items they cover.

Guarantee: a hold is a persistent node under the collection's name and under each of its
profiles' names, the lock Merritt's ingest checks; a release deletes only the holds this
side placed (unless asked otherwise), each at the version read, so a hold placed again
meanwhile stays.
"""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NoNodeError

from .. import tree as t
from ..itemkeys import collection_of, profile_of
from ..sides import CREATED_BY, CREATED_BY_KEY
from .shared import Shared


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


class Holds:
    """Placing, reading and releasing collection holds."""

    def __init__(self, shared: Shared):
        self.shared = shared  # its profiles are set after the store is built (``runtime``)
        self.client = shared.client
        self.engine = shared.engine
        self.reads = shared.reads
        self.stats = shared.stats
        self.changes = shared.changes

    def hold_collection(self, mnemonic: str, *, by: str = "", reason: str = "") -> bool:
        """Hold a collection under its own name and under each of its profiles' names, the
        lock Merritt's ingest checks; who, why and that this side placed it ride in each
        node's data (MerrittZK ignores it; ``release_collection`` reads it)."""
        data = t.encode_json(
            {"by": by, "reason": reason, "at": t.now(), CREATED_BY_KEY: CREATED_BY}
        )
        changed = False
        for name in self._hold_names(mnemonic):
            changed = self.engine.flag(t.collection_lock(name), True, data) or changed
        self.changes.changed("collection", mnemonic, None)
        return changed

    def read_collection_hold(self, mnemonic: str) -> dict | None:
        """Who held a collection, why and when ({} when not recorded); None when not held.

        A hold Merritt wrote under one of the collection's profiles counts.
        """
        paths = [t.collection_lock(name) for name in self._hold_names(mnemonic)]
        got = self.reads.get_many(paths)
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
        got = self.reads.get_many(t.collection_lock(n) for n in names)
        return {
            name: (_placed_here(node[0]), node[1].version)
            for name in names
            if (node := got[t.collection_lock(name)]) is not None
        }

    def is_collection_held(self, mnemonic: str) -> bool:
        return self.read_collection_hold(mnemonic) is not None

    def _hold_names(self, mnemonic: str) -> list[str]:
        """The lock names a hold of ``mnemonic`` is written under: ours, then Merritt's."""
        return [mnemonic, *(p for p in self.shared.profiles.profiles_of(mnemonic) if p != mnemonic)]

    def item_hold(self, data: dict | None) -> str | None:
        """Why a job or batch (its configuration or submission) is held by a collection
        hold, in words for its message; None when it is not.

        Every Pending job and batch asks, and holds are rare: one listing of the holds
        answers, and the profile table is asked only when some hold's name needs it.
        """
        held = set(self.held_collections())
        if not held:
            return None
        collection = collection_of(data, self.shared.profiles)
        if collection and (collection in held or not held.isdisjoint(self._hold_names(collection))):
            return f"collection {collection} is on hold"
        profile = profile_of(data)
        if profile and profile != collection and profile in held:
            return f"profile {profile} is on hold (a collection hold set in Merritt)"
        return None

    def item_collection(self, data: dict | None) -> str:
        """The collection of a job or batch written by either side ("" when unknown)."""
        return collection_of(data, self.shared.profiles)

    def held_collections(self) -> list[str]:
        return sorted(self.reads.children(t.LOCK_COLLECTIONS))
