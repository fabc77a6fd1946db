"""Filters of the job list; each is a query-string parameter. Most read an indexed column;
a text search and a part of a message read the text index (mirror.textindex)."""

from __future__ import annotations

import re

import django_filters as df
from django import forms
from django.db.models import Q

from batches.models import Batch
from inventory.idsearch import names_ark, normalised, starts_with
from jobs.models import JOB_STATUS_CHOICES, Job, awaiting_review
from jobs.stalls import stalled_jids
from jobs.waitfacts import queue_facts
from jobs.waitquery import with_reason
from merritt_queue.core.states import JOB_STEPS, RESUMES_AFTER, JobStatus, resume_target
from merritt_queue.core.waiting import REASONS
from mirror import textindex
from mirror.facade import LOCAL_ID_SEPARATOR
from ui import quarantine
from ui.filters import DateRange, id_search, in_collection

# An ARK's NAAN and the start of its name, as a person copies it without "ark:/": found by a
# seek on the ARK column's index; the text index would read the trigrams of the NAAN, which
# every job of the site holds.
ARK_START = re.compile(r"^\d{5,}/[^\s/]")


def local_id_first(value: str) -> Q:
    """Jobs whose only or first local id is ``value``: both forms use the column's index."""
    return Q(local_id=value) | starts_with("local_id", value + LOCAL_ID_SEPARATOR)


# The batches a text search finds by their batchID, at most: a part shared by more is typed
# further (their ids are listed in the jobs' query, so that an index serves it).
BATCHES_BY_BATCH_ID = 1000


def text_search(value: str, walk: bool = False) -> Q:
    """Jobs whose message, title, local id, ARK or batch contains ``value``, or whose
    batch's batchID does, in any case: read from the text index (``walk``: see
    ``textindex.matching``)."""
    by_batch_id = textindex.matching(textindex.BATCHES, value, ("uuid",))
    bids = Batch.objects.filter(by_batch_id).values_list("bid", flat=True)
    listed = list(bids[:BATCHES_BY_BATCH_ID])
    found = textindex.matching(textindex.JOBS, value, walk=walk)
    return found | Q(batch_id__in=listed) if listed else found


def failed_at_values() -> dict[str, list[str]]:
    """For each step a job can fail in, the ``last_successful_status`` values that mean it.

    A failed job's failed step is the one it would resume at: the successor of its last
    successful status (none, or Held, means it failed while Pending).
    """
    steps: dict[str, list[str]] = {JobStatus.PENDING.value: [], **{str(s): [] for s in JOB_STEPS}}
    for last in ("", *RESUMES_AFTER):  # any other value does not say where it failed
        steps[resume_target(last or None)].append(str(last))
    return steps


FAILED_AT = failed_at_values()


class JobFilter(df.FilterSet):
    q = df.CharFilter(
        method="search",
        label="Search",
        help_text="job id, ARK or a link to it, or part (3 characters or more) of a message, "
        "title, local id, ARK, batch or batchID",
    )
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
    waiting = df.ChoiceFilter(
        choices=list(REASONS.items()),
        method="filter_waiting",
        label="Waiting for",
        empty_label="any",
    )
    collection = df.CharFilter(
        method="filter_collection",
        label="Collection",
        widget=forms.TextInput(attrs={"list": "mq-collections"}),
    )
    batch = df.CharFilter(field_name="batch_id", label="Batch")
    submitter = df.CharFilter(label="Submitter")
    message = df.CharFilter(
        method="filter_message",
        label="Message",
        help_text="any part of it, 3 characters or more, in any case",
    )
    # The dashboard links each frequent cause of failure to its jobs (ui.signatures).
    signature = df.CharFilter(
        method="filter_signature",
        label="Cause",
        help_text="a message with its numbers, ids and links as <n>, <id>, <url>…",
    )
    last_modified = DateRange(label="Last change")
    # Jobs far past their state's usual time for their size (jobs.stalls), as ?stalled=1.
    stalled = df.ChoiceFilter(
        choices=[("1", "stalled only")],
        method="filter_stalled",
        label="Stalled",
        empty_label="any",
        help_text="far longer in their step than jobs of their size usually take",
    )
    awaiting = df.ChoiceFilter(
        choices=[("1", "awaiting approval")],
        method="filter_awaiting",
        label="Destructive update",
        empty_label="any",
        help_text="Held after Processing until a person approves or rejects it",
    )
    quarantined = df.ChoiceFilter(
        choices=[("1", "only quarantined")],
        method="filter_quarantined",
        label="Quarantined",
        empty_label="any",
        help_text="failed again and again with one cause (MQ_POISON_FAILURES)",
    )

    class Meta:
        model = Job
        fields: list[str] = []

    # Set when a text most jobs hold is searched: the page then skips the count.
    scans = False

    def search(self, queryset, name, value):
        """An exact job id, ARK or local id finds those jobs; any other text of three
        characters or more, the jobs that contain it (``text_search``). An ARK or a link to
        one (n2t.net, arks.org) is looked for as the ARK it names.

        A shorter text finds exact identifiers only: the text index needs three.
        """
        value = value.strip()
        if not value:
            return queryset
        ids = Q(jid=value) | Q(ark=value) | local_id_first(value)
        if names_ark(value):
            value = normalised(value)
            ids |= Q(ark=f"ark:/{value}")
        elif ARK_START.match(value):  # "13030/m5abc": the start of an ARK after its "ark:/"
            ids |= starts_with("ark", f"ark:/{value.lower()}")
        jid = id_search(value, "jid")
        if jid:
            ids |= Q(jid=jid)
        if Job.objects.filter(ids).exists():
            return queryset.filter(ids)
        # A text most jobs hold: pages are found by walking the list, and not counted.
        self.scans = textindex.plenty(textindex.JOBS, value)
        return queryset.filter(text_search(value, walk=self.scans))

    def filter_collection(self, queryset, name, value):
        return queryset.filter(in_collection(value))

    def filter_waiting(self, queryset, name, value):
        return with_reason(queryset, value, queue_facts())

    def filter_message(self, queryset, name, value):
        if not value.strip():
            return queryset
        value, columns = value.strip(), ("message",)
        self.scans = self.scans or textindex.plenty(textindex.JOBS, value, columns)
        return queryset.filter(textindex.matching(textindex.JOBS, value, columns, walk=self.scans))

    def filter_signature(self, queryset, name, value):
        """The jobs of one cause, by the mirror's indexed column (ui.signatures.cause_of)."""
        return queryset.filter(signature=" ".join(value.split()))

    def filter_awaiting(self, queryset, name, value):
        return queryset.filter(awaiting_review()) if value == "1" else queryset

    def filter_quarantined(self, queryset, name, value):
        return quarantine.only_quarantined(queryset) if value == "1" else queryset

    def filter_failed_at(self, queryset, name, value):
        return queryset.filter(status=JobStatus.FAILED, last_successful_status__in=FAILED_AT[value])

    def filter_stalled(self, queryset, name, value):
        return queryset.filter(jid__in=stalled_jids()) if value == "1" else queryset
