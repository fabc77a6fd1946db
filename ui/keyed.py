"""Table data whose pages are read in two steps: the page's keys, then those rows."""

from __future__ import annotations

from django_tables2.data import TableQuerysetData


class KeyedQuerysetData(TableQuerysetData):
    """A table's queryset that a paginator slices into keys first, then rows by key.

    Skipping the rows before a deep page, or sorting on a column with no index, then moves
    only keys and sort values, never whole rows with their titles and messages. Django's
    Paginator (a count, the keys, the rows) and django-tables2's LazyPaginator (no count)
    slice it as they slice any table data, so neither needs to know.
    """

    def __getitem__(self, key):
        if not isinstance(key, slice):
            return super().__getitem__(key)
        keys = list(self.data.values_list("pk", flat=True)[key])
        return self.by_keys(keys)

    def by_keys(self, keys: list) -> list:
        """The rows of these primary keys, in the keys' order.

        Only the keys select them: repeating the filters would let the database pick a
        filter's index over the page's primary keys.
        """
        rows = self.data.model._base_manager.filter(pk__in=keys)
        names, defer = self.data.query.deferred_loading
        if names:
            rows = rows.defer(*names) if defer else rows.only(*names)
        if annotations := self.data.query.annotation_select:
            # Values computed per row (a key of a JSON column): for the page's rows alone.
            rows = rows.annotate(**annotations)
        position = {key: i for i, key in enumerate(keys)}
        return sorted(rows, key=lambda r: position[r.pk])
