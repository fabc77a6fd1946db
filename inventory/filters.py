"""Filters of the object list: the collection, and one search box for ARK, local id or title."""

from __future__ import annotations

import django_filters as df
from django import forms

from inventory.models import InventoryObject, LocalIdentifier


class ObjectFilter(df.FilterSet):
    q = df.CharFilter(method="search", label="Search", help_text="ARK, local id or title")
    collection = df.CharFilter(
        label="Collection", widget=forms.TextInput(attrs={"list": "mq-collections"})
    )

    class Meta:
        model = InventoryObject
        fields: list[str] = []

    # Set when the search reads every row (a title search): the page then skips the count.
    scans = False

    def search(self, queryset, name, value):
        """An exact ARK or local id finds those objects; any other text, the titles.

        ARKs and local ids are indexed; a title search reads every row, so it is the fallback.
        Only ``queryset`` (the objects the person may read) is asked whether an ARK or local
        id is known, so the answer tells nothing of other collections' objects.
        """
        value = value.strip()
        if not value:
            return queryset
        if queryset.filter(ark=value).exists():
            return queryset.filter(ark=value)
        arks = list(LocalIdentifier.objects.filter(local_id=value).values_list("ark", flat=True))
        if arks and queryset.filter(ark__in=arks).exists():
            return queryset.filter(ark__in=arks)
        self.scans = True
        return queryset.filter(title__icontains=value)
