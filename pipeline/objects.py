"""Who may add a version to an object: the ownership rule of the submission door and of
Processing.

An object belongs to the collection it was created in (``InventoryObject.collection``), and
only a submission to that collection may add a version to it. An ARK the inventory does
not hold yet is accepted only when this queue bound it to a local id of the same collection
(minted for an earlier job that has not reached Recording), or when the profile lets its
depositors bring identifiers minted elsewhere, under the shoulders it names. Everything else
is refused, so a depositor can neither reach into another collection nor invent an ARK.

The inventory tables are read here, never written.
"""

from __future__ import annotations

from inventory.models import InventoryObject, LocalIdentifier
from merritt_queue.services.storage import ark_problem as stored_ark_problem


class Refusal(str):
    """Why a change is refused; ``other_collection`` when the object is another
    collection's (the door answers 403 then, 400 for an identifier it does not accept)."""

    other_collection: bool = False

    @classmethod
    def of(cls, text: str, *, other_collection: bool = False) -> Refusal:
        refusal = cls(text)
        refusal.other_collection = other_collection
        return refusal


def ark_problem(value: str) -> str | None:
    """Why ``value`` cannot be a primary identifier: the rule storage applies
    (``storage.ark_problem``), so what the door takes a worker can store."""
    return stored_ark_problem(value)


def owner_of(ark: str) -> str | None:
    """The collection the object ``ark`` was created in; None when inventory lacks it."""
    return InventoryObject.objects.filter(ark=ark).values_list("collection", flat=True).first()


def other_collection_refusal(collection: str, ark: str) -> Refusal | None:
    """The refusal when ``ark`` is an object of another collection than ``collection``."""
    return _owner_refusal(collection, ark, owner_of(ark))


def _owner_refusal(collection: str, ark: str, owner: str | None) -> Refusal | None:
    if owner is None or owner == collection:
        return None
    # The owner stays unsaid: which collection holds an object is not the depositor's to learn.
    whose = "another collection" if owner else "no collection (it was recorded without one)"
    return Refusal.of(
        f"{ark} belongs to {whose}; a submission to collection {collection} may not add a "
        "version to it",
        other_collection=True,
    )


def change_refusal(collection: str, ark: str, profile) -> Refusal | None:
    """Why a depositor of ``collection`` (submitting with ``profile``) may not name ``ark``
    as the object to add a version to; None if they may."""
    if problem := ark_problem(ark):
        return Refusal.of(problem)
    owner = owner_of(ark)
    if owner is not None:
        return _owner_refusal(collection, ark, owner)
    if LocalIdentifier.objects.filter(collection=collection, ark=ark).exists():
        return None  # minted here for this collection; its first version is on its way
    allowed = profile is not None and profile.allow_external_ids
    shoulders = profile.external_shoulder_list if allowed else []
    if shoulders and any(ark.startswith(s) for s in shoulders):
        return None
    return Refusal.of(_unknown_text(ark, profile, shoulders))


def _unknown_text(ark: str, profile, shoulders: list[str]) -> str:
    head = f"{ark} is not an object of this repository (no version of it is in inventory)"
    name = profile.name if profile is not None else "this"
    if not shoulders:
        return (
            f"{head}, and profile {name} does not accept identifiers minted elsewhere: leave "
            "primary_id out to have an ARK minted, or give the ARK of one of the collection's "
            "objects"
        )
    return (
        f"{head}, and profile {name} accepts identifiers minted elsewhere only under "
        f"{', '.join(shoulders)}"
    )
