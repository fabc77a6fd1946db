"""Which collections a moment shows: a person's reading scope (``ui.reading_scope``) as
one value, so that counts grouped once can be narrowed without another query."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet


@dataclass(frozen=True)
class Scope:
    """``collections`` None: every collection. ``profiles``: the profiles of those
    collections, for Merritt's rows that name only a profile (``ui.filters.in_collection``)."""

    collections: frozenset[str] | None
    profiles: frozenset[str] = frozenset()

    @property
    def everything(self) -> bool:
        return self.collections is None

    def admits(self, collection: str, profile: str = "") -> bool:
        if self.collections is None:
            return True
        return collection in self.collections or (not collection and profile in self.profiles)

    def narrow(self, rows: QuerySet) -> QuerySet:
        """Job or batch rows of the scope."""
        if self.collections is None:
            return rows
        return rows.filter(
            Q(collection__in=self.collections) | Q(collection="", profile__in=self.profiles)
        )

    def key(self) -> str:
        return "all" if self.collections is None else ",".join(sorted(self.collections))


EVERYTHING = Scope(None)


def of_user(user) -> Scope:
    from batches.models import Profile
    from ui.reading_scope import readable_collections

    allowed = readable_collections(user)
    if allowed is None:
        return EVERYTHING
    names = Profile.objects.filter(collection__in=allowed).values_list("name", flat=True)
    return Scope(frozenset(allowed), frozenset(names))
