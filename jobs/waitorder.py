"""Why one job or batch waits, with its place in the queue and when it should start and
finish: what a job's or batch's page and the status API show (a few queries per item).

The place is the one the dispatcher would give it: its state's jobs in ``PP-JID`` order, and
for Pending, batches taking turns within a priority (``merritt_queue.core.fairness``): of
each other batch at its priority, as many jobs go first as its own batch has ahead of it.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import Count, Q, Sum
from django.db.models.fields.json import KT
from django.utils import timezone

from batches.models import Batch
from jobs.models import Job
from jobs.waitfacts import measured_rate, queue_facts
from merritt_queue.core import waiting as w
from merritt_queue.core.sides import CREATED_BY_KEY, runs_batch, runs_job
from merritt_queue.core.states import BatchStatus, JobStatus
from merritt_queue.core.stepowners import KEY as STORE_RECORD
from merritt_queue.core.waitestimate import estimate

# The keys of a job's configuration the decision reads (who stores, whose workers run it):
# the lists annotate them (``list_keys``) rather than load the configuration.
CONFIG_KEYS = (STORE_RECORD, "payload_url", "payload_type", CREATED_BY_KEY)


def list_keys() -> dict:
    """The annotations a list's rows carry for ``job_item``."""
    return {f"conf_{key}": KT(f"configuration__{key}") for key in CONFIG_KEYS}


def job_item(job: Job) -> w.Item:
    if f"conf_{STORE_RECORD}" in job.__dict__:  # a list's row (``list_keys``)
        config = {key: job.__dict__[f"conf_{key}"] for key in CONFIG_KEYS}
    else:
        config = job.configuration or {}
    store_record = config.get(STORE_RECORD) or ""
    return w.Item(
        "job",
        job.jid,
        job.status,
        job.collection,
        job.locked,
        job.message,
        job.ark,
        job.space_needed,
        store_record,
        runs_job(settings.MQ_WORKERS, config),
    )


def batch_item(batch: Batch) -> w.Item:
    ours = runs_batch(settings.MQ_WORKERS, batch.submission)
    return w.Item("batch", batch.bid, batch.status, batch.collection, batch.locked, ours=ours)


def ahead_of(job: Job) -> tuple[int, int]:
    """The jobs and bytes ahead of ``job`` in its state, in the dispatcher's order."""
    same = Job.objects.filter(status=job.status).order_by()
    first = Q(priority__lt=job.priority)
    if job.status != JobStatus.PENDING:
        agg = same.filter(first | Q(priority=job.priority, jid__lt=job.jid)).aggregate(
            n=Count("id"), b=Sum("space_needed")
        )
        return agg["n"], agg["b"] or 0
    agg = same.filter(first).aggregate(n=Count("id"), b=Sum("space_needed"))
    jobs, size = agg["n"], agg["b"] or 0
    level = same.filter(priority=job.priority)
    batch = job.batch_id or ""
    own = level.filter(batch_id=batch, jid__lt=job.jid).aggregate(
        n=Count("id"), b=Sum("space_needed")
    )
    turn = own["n"]
    jobs, size = jobs + turn, size + (own["b"] or 0)
    others = (
        level.exclude(batch_id=batch)
        .values_list("batch_id")
        .annotate(n=Count("id"), b=Sum("space_needed"))
    )
    for _, n, b in others:
        taken = min(n, turn)
        jobs += taken
        size += (b or 0) * taken // n if n else 0
    return jobs, size


def job_waiting(job: Job, now: datetime | None = None, facts=None) -> w.Waiting | None:
    """Why ``job`` waits (None when it does not), with its order while a worker is awaited."""
    now = now or timezone.now()
    facts = facts or queue_facts(now)
    found = w.decide(job_item(job), facts)
    if found is not None and found.code == w.WORKER:
        jobs, size = ahead_of(job)
        found.order = estimate(jobs + 1, jobs, size, job.status, measured_rate(now), now)
        if found.order.starts_at:
            found.ends_at = found.order.starts_at
    return found


def batch_waiting(batch: Batch, now: datetime | None = None, facts=None) -> w.Waiting | None:
    """Why ``batch`` waits. A Pending batch waiting for a worker has its place among the
    Pending batches; a batch whose jobs are under way waits as its last job does, and
    finishes when that job should."""
    now = now or timezone.now()
    facts = facts or queue_facts(now)
    item = batch_item(batch)
    found = w.decide(item, facts)
    if found is not None:
        if found.code == w.WORKER:
            ahead = Batch.objects.filter(status=BatchStatus.PENDING, bid__lt=batch.bid).count()
            found.order = w.Order(ahead + 1, ahead, 0)
        return found
    if batch.status in w.BATCH_DONE or batch.status == BatchStatus.PENDING or batch.locked:
        return None
    last = last_job(batch)
    job_wait = job_waiting(last, now, facts) if last is not None else None
    if job_wait is None:
        return None
    job_wait.words = f"its last job {last.jid} waits: {job_wait.words}"  # type: ignore[union-attr]
    if job_wait.public_words:
        job_wait.public_words = f"its last job waits: {job_wait.public_words}"
    if job_wait.order is not None:
        job_wait.ends, job_wait.ends_at = "when its last job finishes", job_wait.order.finishes_at
    return job_wait


# Earliest first: the job furthest from its end is in the first of these that has one.
_WORK = (JobStatus.PENDING, *(s for s in JobStatus if s not in w.JOB_DONE))


def last_job(batch: Batch) -> Job | None:
    """The batch's job that should finish last: the least advanced, last in its order."""
    counts = batch.job_counts or {}
    for status in dict.fromkeys(_WORK):
        if counts and not counts.get(status):
            continue
        job = (
            Job.objects.filter(batch_id=batch.bid, status=status)
            .order_by("-priority", "-jid")
            .first()
        )
        if job is not None:
            return job
    return None
