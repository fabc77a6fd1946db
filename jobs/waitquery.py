"""The waiting reasons as SQL: the list filters and /metrics select and count by reason in
the database, with the rules of ``merritt_queue.core.waiting.decide`` in the same order (a
CASE takes the first that holds). ``tests/pages/test_waiting_lists.py`` checks that both
give every row the same reason.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Case, CharField, Count, Q, QuerySet, Value, When

from batches.models import Batch
from jobs.models import Job
from merritt_queue.core import waiting as w
from merritt_queue.core.planning import SUBMISSION_TYPES
from merritt_queue.core.rerun import RERUN_TYPE
from merritt_queue.core.sides import ALL, CREATED_BY, CREATED_BY_KEY, OWN
from merritt_queue.core.states import BatchStatus, JobStatus
from merritt_queue.core.stepowners import KEY as STORE_RECORD
from merritt_queue.core.stepowners import MERRITT_QUEUE

NOT_WAITING = ""
# Listed, not excluded: the status index then finds the unfinished rows without reading the
# finished ones, the bulk of a large mirror.
LIVE_JOB = [s.value for s in JobStatus if s not in w.JOB_DONE]
LIVE_BATCH = [s.value for s in BatchStatus if s not in w.BATCH_DONE]
ANNOTATION = "waiting_reason"


def live(model) -> Q:
    """The unfinished rows of ``model``, named by their keys as the status index lists them.

    A bare ``status IN (...)`` beside a reason's JSON lookups made SQLite read the whole
    table: without a histogram it takes each listed status for an average one, nine of them
    for most rows, though the finished rows are the bulk of a large mirror. Asked as keys
    from the status index (which holds them: a covering read), only the unfinished rows are
    then read, whatever the planner guesses.
    """
    statuses = LIVE_BATCH if model is Batch else LIVE_JOB
    keys = model.objects.filter(status__in=statuses).order_by().values("pk")
    return Q(status__in=statuses, pk__in=keys)


def _held_split(facts: w.QueueFacts) -> tuple[list[str], list[str]]:
    """The held collections: those a person held, those a maintenance window holds."""
    person = [c for c, h in facts.holds.items() if h.window is None]
    window = [c for c, h in facts.holds.items() if h.window is not None]
    return person, window


def _when(condition: Q, code: str) -> When:
    return When(condition, then=Value(code))


def _given(path: str) -> Q:
    """A JSON key present and not empty (what ``sides`` reads as given)."""
    return Q(**{f"{path}__isnull": False}) & ~Q(**{path: ""})


def _is(path: str, lookup: str, value) -> Q:
    """A JSON key present and matching: a missing key is a plain no, never SQL's unknown,
    which a negation would keep unknown."""
    return Q(**{f"{path}__isnull": False}) & Q(**{f"{path}{lookup}": value})


def _theirs(field: str, ours_in_format: Q) -> When:
    """Items this site's workers leave to Merritt's ingest (``sides``, ``MQ_WORKERS``)."""
    mode = settings.MQ_WORKERS
    if mode == ALL:
        ours = ours_in_format
    elif mode == OWN:
        ours = ours_in_format & _is(f"{field}__{CREATED_BY_KEY}", "", CREATED_BY)
    else:  # none: every item is left
        return _when(Q(pk__isnull=False), w.MERRITT_INGEST)
    return _when(~ours, w.MERRITT_INGEST)


def job_case(facts: w.QueueFacts) -> Case:
    """A job's reason, ``NOT_WAITING`` when it does not wait."""
    person, window = _held_split(facts)
    held = Q(status=JobStatus.HELD)
    rules = [
        _when(Q(status__in=w.JOB_DONE), NOT_WAITING),
        _when(held & Q(collection__in=window), w.MAINTENANCE_WINDOW),
        _when(held & Q(collection__in=person), w.COLLECTION_HELD),
        _when(held, w.HELD),
        _when(Q(locked=True), NOT_WAITING),
    ]
    for status, code in w.MERRITT_STEPS.items():
        merritt = Q(**{f"configuration__{STORE_RECORD}": MERRITT_QUEUE})
        rules.append(_when(Q(status=status) & merritt, code))
    if facts.pause is not None:
        code = w.QUEUE_PAUSED if facts.pause.window is None else w.MAINTENANCE_WINDOW
        rules.append(_when(Q(pk__isnull=False), code))
    pending = Q(status=JobStatus.PENDING)
    rules.append(_when(pending & Q(collection__in=window), w.MAINTENANCE_WINDOW))
    rules.append(_when(pending & Q(collection__in=person), w.COLLECTION_HELD))
    job_format = _given("configuration__payload_url") & _given("configuration__payload_type")
    rules.append(_theirs("configuration", job_format))
    for breaker in facts.breakers:
        rules.append(_when(Q(status__in=breaker.states), w.DEPENDENCY_DOWN))
    for code, states, marker in w.MESSAGE_RULES:
        rules.append(_when(Q(status__in=states, message__icontains=marker), code))
    return Case(*rules, default=Value(w.WORKER), output_field=CharField())


def batch_case(facts: w.QueueFacts) -> Case:
    """A batch's own reason (one whose jobs are under way has none of its own)."""
    person, window = _held_split(facts)
    held = Q(status=BatchStatus.HELD)
    pending = Q(status=BatchStatus.PENDING)
    rules = [
        _when(Q(status__in=w.BATCH_DONE), NOT_WAITING),
        _when(held & Q(collection__in=window), w.MAINTENANCE_WINDOW),
        _when(held & Q(collection__in=person), w.COLLECTION_HELD),
        _when(held, w.HELD),
        _when(Q(locked=True), NOT_WAITING),
    ]
    if facts.pause is not None:
        code = w.QUEUE_PAUSED if facts.pause.window is None else w.MAINTENANCE_WINDOW
        rules.append(_when(Q(pk__isnull=False), code))
    rules.append(_when(pending & Q(collection__in=window), w.MAINTENANCE_WINDOW))
    rules.append(_when(pending & Q(collection__in=person), w.COLLECTION_HELD))
    rules.append(_when(~pending, NOT_WAITING))
    rerun = _is("submission__type", "", RERUN_TYPE) & _given("submission__rerun_of")
    ours = _given("submission__payload_url") & _is("submission__type", "__in", SUBMISSION_TYPES)
    rules.append(_theirs("submission", rerun | ours))
    return Case(*rules, default=Value(w.WORKER), output_field=CharField())


def with_reason(rows: QuerySet, code: str, facts: w.QueueFacts) -> QuerySet:
    """``rows`` waiting for ``code``; none for an unknown code."""
    if code not in w.REASONS:
        return rows.none()
    case = batch_case(facts) if rows.model is Batch else job_case(facts)
    return rows.filter(live(rows.model)).alias(**{ANNOTATION: case}).filter(**{ANNOTATION: code})


def jobs_waiting_by_reason(facts: w.QueueFacts) -> dict[str, int]:
    """How many jobs wait for each reason: one GROUP BY over the unfinished jobs."""
    rows = (
        Job.objects.filter(live(Job))
        .order_by()
        .annotate(**{ANNOTATION: job_case(facts)})
        .values_list(ANNOTATION)
        .annotate(n=Count("id"))
    )
    counts = dict.fromkeys(w.REASONS, 0)
    counts.update({code: n for code, n in rows if code != NOT_WAITING})
    return counts


def waiting_rows(facts: w.QueueFacts) -> list[tuple[str, str, int]]:
    """The reasons some job waits for, with their label and count, most jobs first: the
    dashboard's panel, from the same GROUP BY as /metrics."""
    counts = jobs_waiting_by_reason(facts)
    rows = [(code, w.REASONS[code], n) for code, n in counts.items() if n]
    order = list(w.REASONS)
    return sorted(rows, key=lambda r: (-r[2], order.index(r[0])))
