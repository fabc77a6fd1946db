"""Filters of the job list; every one is a query-string parameter on an indexed column."""

from __future__ import annotations

import django_filters as df
from django import forms
from django.db.models import Q

from jobs.models import JOB_STATUS_CHOICES, Job
from merritt_queue.core.states import JOB_STEPS, RESUMES_AFTER, JobStatus, resume_target
from mirror.facade import LOCAL_ID_SEPARATOR
from ui.filters import DateRange, id_search, in_collection


def local_id_first(value: str) -> Q:
    """Jobs whose only or first local id is ``value``: both forms use the column's index."""
    return Q(local_id=value) | Q(local_id__startswith=value + LOCAL_ID_SEPARATOR)


def local_id_later(value: str) -> Q:
    """Jobs that have ``value`` as a later one of their local ids (the column joins them
    all): a scan of every row, as a title search is."""
    sep = LOCAL_ID_SEPARATOR
    return Q(local_id__endswith=sep + value) | Q(local_id__contains=sep + value + sep)


def failed_at_values() -> dict[str, list[str]]:
    """For each step a job can fail in, the ``last_successful_status`` values that mean it.

    A failed job's failed step is the one it would resume at: the successor of its last
    successful status (none, or Held, means it failed while Pending).
    """
    steps: dict[str, list[str]] = {JobStatus.PENDING.value: [], **{s.value: [] for s in JOB_STEPS}}
    for last in ("", *RESUMES_AFTER):  # any other value does not say where it failed
        steps[resume_target(last or None)].append(str(last))
    return steps


FAILED_AT = failed_at_values()


class JobFilter(df.FilterSet):
    q = df.CharFilter(method="search", label="Search", help_text="job id, ARK, local id or title")
    status = df.MultipleChoiceFilter(
        choices=JOB_STATUS_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        label="Status",
        distinct=False,  # one row per job already; DISTINCT would make the count scan
    )
    failed_at = df.ChoiceFilter(
        choices=[(step, step) for step in FAILED_AT],
        method="filter_failed_at",
        label="Failed at step",
        empty_label="any",
    )
    collection = df.CharFilter(
        method="filter_collection",
        label="Collection",
        widget=forms.TextInput(attrs={"list": "mq-collections"}),
    )
    batch = df.CharFilter(field_name="batch_id", label="Batch")
    submitter = df.CharFilter(label="Submitter")
    # Exact: the dashboard links each frequent error message to the jobs that carry it.
    message = df.CharFilter(label="Message (exact)")
    last_modified = DateRange(label="Last change")

    class Meta:
        model = Job
        fields: list[str] = []

    # Set when the search reads every row (a title search): the page then skips the count.
    scans = False

    def search(self, queryset, name, value):
        """An exact job id, ARK or local id finds those jobs; any other text, the titles
        (and the jobs that have it as a later one of several local ids).

        Identifiers are indexed; a title search reads every row, so it is the fallback.
        """
        value = value.strip()
        if not value:
            return queryset
        ids = Q(jid=value) | Q(ark=value) | local_id_first(value)
        jid = id_search(value, "jid")
        if jid:
            ids |= Q(jid=jid)
        if Job.objects.filter(ids).exists():
            return queryset.filter(ids)
        self.scans = True
        return queryset.filter(Q(title__icontains=value) | local_id_later(value))

    def filter_collection(self, queryset, name, value):
        return queryset.filter(in_collection(value))

    def filter_failed_at(self, queryset, name, value):
        return queryset.filter(status=JobStatus.FAILED, last_successful_status__in=FAILED_AT[value])
