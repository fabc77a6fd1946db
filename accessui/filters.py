"""Filters of the access list; each is a query-string parameter over the mirror's rows
(``access.AccessRequest``). A request removed from the queue is kept as history and shown
only when asked (``removed``)."""

from __future__ import annotations

from datetime import timedelta

import django_filters as df
from django import forms
from django.db.models import Q
from django.http import QueryDict
from django.utils import timezone

from access.models import QUEUE_CHOICES, AccessRequest
from merritt_queue.core.access import AccessStatus
from ui.filters import id_search

STATUS_CHOICES = [(s.value, s.value) for s in AccessStatus]
YES_NO = [("yes", "yes"), ("no", "no")]
MAX_DAYS = 36500  # a century: older than the queue, and well within a date's range


class AccessFilter(df.FilterSet):
    q = df.CharFilter(
        method="search",
        label="Search",
        help_text="request id (qid42), token, ARK, or part of the download URL",
    )
    queue = df.ChoiceFilter(choices=QUEUE_CHOICES, label="Queue", empty_label="both")
    status = df.MultipleChoiceFilter(
        choices=STATUS_CHOICES, widget=forms.CheckboxSelectMultiple, label="Status"
    )
    locked = df.ChoiceFilter(
        choices=YES_NO, method="filter_locked", label="Locked", empty_label="any"
    )
    older_than = df.NumberFilter(
        method="filter_older_than",
        label="Unchanged for (days)",
        min_value=0,
        max_value=MAX_DAYS,  # a timedelta past the year 1 overflows
        help_text="its status last written at least this many days ago",
    )
    removed = df.BooleanFilter(
        method="filter_removed",
        label="Removed ones too",
        widget=forms.CheckboxInput,
        help_text="requests cleaned up from the queue, kept as history",
    )

    class Meta:
        model = AccessRequest
        fields: list[str] = []

    @property
    def qs(self):
        rows = super().qs
        if not self.form.cleaned_data.get("removed"):
            rows = rows.filter(removed_at__isnull=True)
        return rows

    def search(self, rows, name, value):
        value = value.strip()
        if not value:
            return rows
        found = Q(token=value) | Q(key=value) | Q(ark=value)
        if qid := id_search(value, "qid"):
            found |= Q(qid=qid)
        if len(value) >= 3:
            found |= Q(url__contains=value) | Q(token__startswith=value)
        return rows.filter(found)

    def filter_locked(self, rows, name, value):
        return rows.filter(locked=value == "yes") if value else rows

    def filter_older_than(self, rows, name, value):
        if value is None:
            return rows
        return rows.filter(status_changed_at__lte=timezone.now() - timedelta(days=float(value)))

    def filter_removed(self, rows, name, value):
        return rows  # applied in ``qs``: hiding removed rows is the default, not a filter


def matching_keys(query: QueryDict, cap: int) -> tuple[list[str] | None, str]:
    """The keys of the requests the list's filter finds (None when more than ``cap``), or
    why the filter is not valid."""
    filterset = AccessFilter(query, queryset=AccessRequest.objects.all())
    if not filterset.is_valid():
        return [], "the list's filter is not valid"
    keys = list(filterset.qs.order_by("queue", "qid").values_list("key", flat=True)[: cap + 1])
    return (None if len(keys) > cap else keys), ""
