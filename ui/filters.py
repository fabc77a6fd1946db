"""Parts the list filters share: a date range, short ids, a collection with its profiles."""

from __future__ import annotations

import django_filters as df
from django.db.models import Q
from django_filters.widgets import DateRangeWidget

from batches.models import Profile


def in_collection(mnemonic: str) -> Q:
    """The items of a collection: those that name it, and those Merritt wrote, which name
    only one of its profiles."""
    names = Profile.objects.filter(collection=mnemonic).values_list("name", flat=True)
    return Q(collection=mnemonic) | Q(collection="", profile__in=list(names))


def id_search(value: str, prefix: str) -> str | None:
    """``42`` or ``jid42`` -> ``jid0000000042``: ids are easier to type without the zeros."""
    digits = value[len(prefix) :] if value.startswith(prefix) else value
    if digits.isdigit() and len(digits) <= 10:
        return f"{prefix}{int(digits):010d}"
    return None


class DateRangeBoxes(DateRangeWidget):
    """Two date boxes under the range's name as a legend, each box named "from" or "to" for
    a screen reader: a label can point at one box only, and the second one had none."""

    use_fieldset = True

    def __init__(self):
        super().__init__(attrs={"type": "date"})
        for box, word in zip(self.widgets, ("from", "to"), strict=True):
            box.attrs["aria-label"] = word


class DateRange(df.DateFromToRangeFilter):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", DateRangeBoxes())
        super().__init__(*args, **kwargs)
