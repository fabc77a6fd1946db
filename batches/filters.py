"""Filters of the batch list; each is a query-string parameter, on an indexed column or the
text index (mirror.textindex)."""

from __future__ import annotations

import django_filters as df
from django import forms
from django.db.models import Q

from batches.models import BATCH_STATUS_CHOICES, Batch
from jobs.waitfacts import queue_facts
from jobs.waitquery import with_reason
from merritt_queue.core.approval import AWAITING
from merritt_queue.core.states import BatchStatus
from merritt_queue.core.waiting import REASONS
from mirror import textindex
from ui.filters import DateRange, id_search, in_collection

AWAITING_FILTER = "awaiting"  # ?approval=awaiting: the batches an operator must decide


def awaiting_q() -> Q:
    """The mirror's batches awaiting approval (``merritt_queue.core.approval``)."""
    return Q(status=BatchStatus.HELD, approval__isnull=False)


class BatchFilter(df.FilterSet):
    q = df.CharFilter(
        method="search",
        label="Search",
        help_text="batch id, or part (3 characters or more) of a batch id, batchID, title or "
        "message",
    )
    status = df.MultipleChoiceFilter(
        choices=BATCH_STATUS_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        label="Status",
        distinct=False,  # one row per batch already; DISTINCT would make the count scan
    )
    collection = df.CharFilter(
        method="filter_collection",
        label="Collection",
        widget=forms.TextInput(attrs={"list": "mq-collections"}),
    )
    submitter = df.CharFilter(label="Submitter")
    waiting = df.ChoiceFilter(
        choices=list(REASONS.items()),
        method="filter_waiting",
        label="Waiting for",
        empty_label="any",
    )
    approval = df.ChoiceFilter(
        choices=[(AWAITING_FILTER, AWAITING)],
        method="filter_approval",
        label="Approval",
        empty_label="any",
    )
    submitted = DateRange(label="Submitted")

    class Meta:
        model = Batch
        fields: list[str] = []

    def filter_collection(self, queryset, name, value):
        return queryset.filter(in_collection(value))

    def filter_approval(self, queryset, name, value):
        return queryset.filter(awaiting_q()) if value == AWAITING_FILTER else queryset

    def filter_waiting(self, queryset, name, value):
        return with_reason(queryset, value, queue_facts())

    def search(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        match = Q(bid=value)
        if textindex.searchable(value):
            match |= textindex.matching(textindex.BATCHES, value)
        bid = id_search(value, "bid")
        if bid:
            match |= Q(bid=bid)
        return queryset.filter(match)
