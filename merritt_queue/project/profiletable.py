"""The core's ``Profiles`` over the Django profile table: the store's (``runtime``) and the
mirror's collections (``mirror.locks``). Its own module, so that the mirror reads it without
importing ``runtime``, which builds the store with the mirror's listener."""

from __future__ import annotations


class ProfileTable:
    """The ``Profiles`` of the core (``itemkeys``), read from the profile table at each call:
    a profile added or moved takes effect at once."""

    def collection_of(self, profile: str) -> str | None:
        from batches.models import Profile  # here: the core modules never import Django apps

        return Profile.objects.filter(name=profile).values_list("collection", flat=True).first()

    def profiles_of(self, collection: str) -> list[str]:
        from batches.models import Profile

        return sorted(Profile.objects.filter(collection=collection).values_list("name", flat=True))
