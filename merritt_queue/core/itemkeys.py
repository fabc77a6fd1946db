"""The keys both writers put in an item's data, and what an item belongs to.

Merritt's ingest and this queue name the same things differently: MerrittZK's
``createJobConfiguration`` writes ``profile_name`` where the submission path writes
``profile``, MerrittZK's ``jid()`` reads ``jobID``, and Merritt's items carry no
``collection`` at all, only a profile, which Merritt also uses as the name of a collection
hold. Everything that reads a profile or a collection from an item asks here, so an item
written by either side is read the same way.

The profile -> collection mapping lives in the Django profile table; the core stays free
of Django and takes it as a ``Profiles`` object (``runtime`` passes the real one).
"""

from __future__ import annotations

from typing import Protocol

PROFILE_KEYS = ("profile", "profile_name")
JOB_ID_KEY = "jobID"


class Profiles(Protocol):
    def collection_of(self, profile: str) -> str | None:
        """The collection a profile ingests into; None when the profile is unknown."""

    def profiles_of(self, collection: str) -> list[str]:
        """The names of the profiles that ingest into a collection."""


class NoProfiles:
    """Without a profile table: an item belongs to the collection it names, if any."""

    def collection_of(self, profile: str) -> str | None:
        return None

    def profiles_of(self, collection: str) -> list[str]:
        return []


def profile_of(data: dict | None) -> str:
    """The item's profile name, from either side's key; "" when it names none."""
    for key in PROFILE_KEYS:
        value = (data or {}).get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def collection_of(data: dict | None, profiles: Profiles) -> str:
    """The item's collection: its own ``collection`` key, else its profile's; "" if neither."""
    value = (data or {}).get("collection")
    if isinstance(value, str) and value:
        return value
    profile = profile_of(data)
    return (profiles.collection_of(profile) or "") if profile else ""


def with_both_profile_keys(configuration: dict) -> dict:
    """A job configuration that names its profile under both sides' keys."""
    profile = profile_of(configuration)
    if not profile:
        return configuration
    return configuration | {key: profile for key in PROFILE_KEYS}


def with_job_id(configuration: dict, jid: str) -> dict:
    """The configuration with its own jid as ``jobID`` when it asks for it (an empty
    ``jobID``, as planning writes: the jid is known only once the store takes one)."""
    if configuration.get(JOB_ID_KEY) == "":
        return configuration | {JOB_ID_KEY: jid}
    return configuration


def holds_by_collection(holds: dict[str, dict], profiles: Profiles, known: set[str]) -> dict:
    """Collection hold locks (lock name -> who/why) as holds of collections: a lock named
    after a profile (Merritt's way, and ours beside the collection's own) is a hold of the
    profile's collection. A name that is neither a ``known`` collection nor a profile stays
    as it is: the hold is shown, under the only name it has."""
    out: dict[str, dict] = {}
    for name, hold in sorted(holds.items()):
        collection = name if name in known else (profiles.collection_of(name) or name)
        out[collection] = out.get(collection) or hold
    return out
