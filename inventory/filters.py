"""Filters of the object list: the collection, and one search box for identifiers (``idsearch``)
or a title."""

from __future__ import annotations

import django_filters as df
from django import forms
from django.db.models import Q

from inventory.idsearch import ark_match, local_key, starts_with
from inventory.models import InventoryObject, LocalIdentifier
from mirror import textindex

# The objects a local id's start finds, at most: a prefix shared by more is typed further.
LOCAL_ARKS = 1000


class ObjectFilter(df.FilterSet):
    q = df.CharFilter(
        method="search",
        label="Search",
        help_text="an ARK or a link to it, a local id, or the start of either; or part "
        "(3 characters or more) of a title",
    )
    collection = df.CharFilter(
        label="Collection", widget=forms.TextInput(attrs={"list": "mq-collections"})
    )

    class Meta:
        model = InventoryObject
        fields: list[str] = []

    # Set when the search reads every row: the page then skips the count.
    scans = False

    def search(self, queryset, name, value):
        """Objects whose ARK or a local id starts with ``value`` as identifiers are typed
        (``idsearch``: a resolver link, ``ark:/`` or not, any case, a bare name, a start);
        when none does, the objects whose title holds it.

        The identifiers are matched by indexed prefixes, a title by the text index (three
        characters or more). Only ``queryset`` (the objects the person may read) is asked whether
        an identifier matched, so the answer tells nothing of other collections' objects.
        """
        value = value.strip()
        if not value:
            return queryset
        found = ark_match(value)
        local = starts_with("local_key", local_key(value))
        arks = LocalIdentifier.objects.filter(local).values_list("ark", flat=True)
        by_local = Q(ark__in=list(arks[:LOCAL_ARKS]))
        matched = queryset.filter(found | by_local if found is not None else by_local)
        if matched.exists():
            return matched
        return queryset.filter(textindex.matching(textindex.OBJECTS, value))
