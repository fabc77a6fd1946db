"""The figures read at each scrape: the mirror, Redis, ZooKeeper, and how far they differ.

Guarantees:

- A part that is away (the database, Redis, ZooKeeper) gives its ``mq_*_up`` gauge 0
  and drops only its own figures; the scrape never fails for it.
- ZooKeeper and Redis are each waited for at most ``MQ_METRICS_TIMEOUT`` seconds. A
  ZooKeeper read still stuck from an earlier scrape is waited for again rather than
  started twice, so a dead ensemble costs one thread, not one per scrape.
- The mirror is read with a fixed number of aggregate queries, whatever the number of
  jobs: counts by status over the status index, and the oldest item of each unfinished
  status over the same index (finished jobs, the bulk of a large mirror, are not read); the
  unfinished jobs by why they wait, in one GROUP BY (``jobs.waitquery``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from batches.models import Batch
from jobs.models import Job, MirrorState
from jobs.waitfacts import queue_facts
from jobs.waitquery import jobs_waiting_by_reason
from merritt_queue.core import access, indexdirs
from merritt_queue.core import tree as t
from merritt_queue.core.queues import all_queue_names
from merritt_queue.core.states import BatchStatus, JobStatus
from merritt_queue.core.zkstats import znode_count
from merritt_queue.project import runtime
from merritt_queue.services import breakers
from merritt_queue.services.breakers import BreakerState
from metrics.accessqueue import access_metrics, read_counts
from metrics.breakers import breaker_metrics
from metrics.foresight import read_foresight

log = logging.getLogger(__name__)

FINAL_JOB = (JobStatus.COMPLETED, JobStatus.DELETED)
FINAL_BATCH = (BatchStatus.COMPLETED, BatchStatus.DELETED)
SESSION_STATES = ("CONNECTED", "SUSPENDED", "LOST")
# The MirrorState rows that say when the mirror was last brought up to date, and how.
MIRROR_UPDATES = ("write-through", "watch", "full", "locks")


def gauge(name: str, doc: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


# --- the mirror -------------------------------------------------------------------


@dataclass
class MirrorFacts:
    jobs: dict[str, int] = field(default_factory=dict)
    batches: dict[str, int] = field(default_factory=dict)
    job_oldest: dict[str, float] = field(default_factory=dict)  # status -> age in seconds
    batch_oldest: dict[str, float] = field(default_factory=dict)
    updated: dict[str, float] = field(default_factory=dict)  # how -> age in seconds
    waiting: dict[str, int] = field(default_factory=dict)  # reason -> jobs (jobs.waitquery)


def read_mirror() -> MirrorFacts:
    """A few queries (see the module's guarantees)."""
    now = timezone.now()
    facts = MirrorFacts()
    # What is still in the queue: the drift gauge compares these with ZooKeeper's counts.
    rows = (
        Job.objects.filter(removed_at__isnull=True)
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"))
    )
    facts.jobs = dict(rows)
    live = [s for s in JobStatus if s not in FINAL_JOB]
    oldest = (
        Job.objects.filter(status__in=live, removed_at__isnull=True)
        .order_by()
        .values_list("status")
        .annotate(at=Min("last_modified"))
    )
    facts.job_oldest = {s: (now - at).total_seconds() for s, at in oldest if at}
    for status, n, at in (
        Batch.objects.order_by()
        .values_list("status")
        .annotate(
            n=Count("id", filter=Q(removed_at__isnull=True)),
            at=Min("last_modified", filter=Q(removed_at__isnull=True)),
        )
    ):
        facts.batches[status] = n
        if at and status not in FINAL_BATCH:
            facts.batch_oldest[status] = (now - at).total_seconds()
    states = MirrorState.objects.filter(name__in=MIRROR_UPDATES).values_list("name", "at")
    facts.updated = {name: (now - at).total_seconds() for name, at in states}
    facts.waiting = jobs_waiting_by_reason(queue_facts(now))
    return facts


def mirror_metrics(facts: MirrorFacts | None) -> Iterator[Metric]:
    up = gauge("mq_mirror_up", "1 when the mirror database answered this scrape, else 0.")
    up.add_metric([], 1 if facts else 0)
    yield up
    if facts is None:
        return
    jobs = gauge("mq_jobs", "Jobs in the mirror, by status.", ["status"])
    for status in [*JobStatus, *sorted(set(facts.jobs) - set(JobStatus))]:
        jobs.add_metric([status], facts.jobs.get(status, 0))
    yield jobs
    batches = gauge("mq_batches", "Batches in the mirror, by status.", ["status"])
    for status in [*BatchStatus, *sorted(set(facts.batches) - set(BatchStatus))]:
        batches.add_metric([status], facts.batches.get(status, 0))
    yield batches
    for kind, oldest in (("job", facts.job_oldest), ("batch", facts.batch_oldest)):
        family = gauge(
            f"mq_{kind}_oldest_age_seconds",
            f"Seconds since the {kind} longest in its status last changed, by unfinished "
            "status (none when the status holds no item).",
            ["status"],
        )
        for status, age in sorted(oldest.items()):
            family.add_metric([status], max(0.0, age))
        yield family
    updated = gauge(
        "mq_mirror_update_age_seconds",
        "Seconds since the mirror was last brought up to date, by how: write-through (this "
        "site's writes), watch (others' writes), full (reconcile), locks.",
        ["how"],
    )
    for how, age in sorted(facts.updated.items()):
        updated.add_metric([how], max(0.0, age))
    yield updated
    waiting = gauge(
        "mq_jobs_waiting",
        'Jobs not moving, by why (docs/usage.md, "Why a job waits"): the same decision '
        "as the pages and the status API.",
        ["reason"],
    )
    for reason, n in facts.waiting.items():
        waiting.add_metric([reason], n)
    yield waiting


# --- Redis ------------------------------------------------------------------------


@dataclass
class RedisFacts:
    queues: dict[str, int]
    workers: int


def read_redis(timeout: float) -> RedisFacts:
    """Two round trips: the queues' lengths and the workers' keys, then which keys live."""
    from rq import Queue
    from rq.worker_registration import REDIS_WORKER_KEYS

    conn = runtime.redis_within(timeout)
    try:
        names = all_queue_names()
        pipe = conn.pipeline(transaction=False)
        for name in names:
            pipe.llen(Queue.redis_queue_namespace_prefix + name)
        pipe.smembers(REDIS_WORKER_KEYS)
        *lengths, keys = pipe.execute()
        pipe = conn.pipeline(transaction=False)
        for key in keys:
            pipe.exists(key)
        workers = sum(1 for alive in pipe.execute() if alive) if keys else 0
        return RedisFacts(dict(zip(names, lengths, strict=True)), workers)
    finally:
        conn.close()


def redis_metrics(facts: RedisFacts | None) -> Iterator[Metric]:
    up = gauge("mq_redis_up", "1 when Redis answered this scrape within MQ_METRICS_TIMEOUT.")
    up.add_metric([], 1 if facts else 0)
    yield up
    if facts is None:
        return
    queues = gauge("mq_rq_queue_jobs", "RQ jobs waiting in each queue.", ["queue"])
    for name, n in facts.queues.items():
        queues.add_metric([name], n)
    yield queues
    workers = gauge("mq_rq_workers", "RQ workers registered and alive, on every host.")
    workers.add_metric([], facts.workers)
    yield workers


# --- ZooKeeper --------------------------------------------------------------------


@dataclass
class ZkFacts:
    jobs: int  # children of /jobs: the jobs of the tree, any status
    batches: int
    by_status: dict[str, int]  # children of /jobs/states/<status>
    znodes: int | None  # the server's own count (mntr), when it tells
    breakers: list[BreakerState] = field(default_factory=list)
    listings: list[indexdirs.DirSize] = field(default_factory=list)
    access_paused: dict[str, bool] | None = None  # Merritt's access queues' pause locks


def read_zookeeper(timeout: float) -> ZkFacts:
    store = runtime.get_store(init=False, connected_within=timeout)
    client = store.client
    pending = {s: client.exists_async(t.job_state_dir(s)) for s in JobStatus}
    batches = client.exists(t.BATCHES)
    by_status: dict[str, int] = {}
    for status, result in pending.items():
        stat = result.get(timeout=timeout)
        by_status[status] = stat.numChildren if stat else 0
    return ZkFacts(
        store.jobs.job_count(),
        batches.numChildren if batches else 0,
        by_status,
        znode_count(settings.ZK_HOSTS, timeout=timeout),
        breakers.snapshot(client),
        indexdirs.measure(client, settings.MQ_ZK_MAXBUFFER, timeout=timeout),
        access.paused(client),
    )


_guard = threading.Lock()
_pending: Future | None = None


def _read_into(future: Future, timeout: float) -> None:
    try:
        future.set_result(read_zookeeper(timeout))
    except BaseException as e:
        future.set_exception(e)


def zookeeper_within(timeout: float) -> ZkFacts | None:
    """``read_zookeeper``, given up after ``timeout`` seconds (None: not read)."""
    global _pending
    with _guard:
        if _pending is None or _pending.done():
            _pending = Future()
            # A daemon thread: one stuck on a dead ensemble must not hold up the process's exit.
            threading.Thread(
                target=_read_into, args=(_pending, timeout), name="metrics-zookeeper", daemon=True
            ).start()
        future = _pending
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        log.warning("/metrics: ZooKeeper did not answer within %g s", timeout)
    except Exception as e:  # away, refused, a session lost: the gauge says so
        log.warning("/metrics: ZooKeeper not read: %r", e)
    return None


def zookeeper_metrics(facts: ZkFacts | None, session: str | None) -> Iterator[Metric]:
    up = gauge(
        "mq_zookeeper_up",
        "1 when this web process's ZooKeeper session answered this scrape, else 0.",
    )
    up.add_metric([], 1 if facts else 0)
    yield up
    state = gauge(
        "mq_zookeeper_session_state",
        "The web process's ZooKeeper session: 1 for its state (NONE: no session yet).",
        ["state"],
    )
    for name in (*SESSION_STATES, "NONE"):
        state.add_metric([name], 1 if (session or "NONE") == name else 0)
    yield state
    if facts is None:
        return
    tree = gauge("mq_tree_jobs", "Jobs in the ZooKeeper tree, any status, until cleanup.")
    tree.add_metric([], facts.jobs)
    yield tree
    limit = gauge("mq_tree_jobs_limit", "MQ_MAX_QUEUE_JOBS: submissions are refused from here.")
    limit.add_metric([], settings.MQ_MAX_QUEUE_JOBS)
    yield limit
    batches = gauge("mq_tree_batches", "Batches in the ZooKeeper tree, until cleanup.")
    batches.add_metric([], facts.batches)
    yield batches
    yield from listing_metrics(facts.listings)
    if facts.znodes is not None:
        znodes = gauge(
            "mq_zookeeper_znodes",
            "Znodes of the whole ZooKeeper server (mntr zk_znode_count), other chroots too.",
        )
        znodes.add_metric([], facts.znodes)
        yield znodes


def listing_metrics(sizes: list[indexdirs.DirSize]) -> Iterator[Metric]:
    listed = gauge(
        "mq_zk_listing_bytes",
        "Bytes of a getChildren answer of each index directory (as a Java client reads it).",
        ["path"],
    )
    ratio = gauge(
        "mq_zk_listing_ratio",
        "Each index directory's listing over MQ_ZK_MAXBUFFER: a Java client cannot list it at 1.",
        ["path"],
    )
    for s in sizes:
        listed.add_metric([s.path], s.bytes)
        ratio.add_metric([s.path], s.ratio)
    yield listed
    yield ratio
    limit = gauge("mq_zk_listing_limit_bytes", "MQ_ZK_MAXBUFFER: the Java clients' jute.maxbuffer.")
    limit.add_metric([], settings.MQ_ZK_MAXBUFFER)
    yield limit


def lag_metrics(mirror: MirrorFacts | None, zk: ZkFacts | None) -> Iterator[Metric]:
    """How far the mirror is behind the tree: jobs whose status the mirror has not caught up
    with, from each status's count on both sides (a job moving shows on two statuses)."""
    if mirror is None or zk is None:
        return
    drift = gauge(
        "mq_mirror_drift_jobs",
        "Jobs in the mirror minus jobs in the tree, by status: 0 when the mirror is up to "
        "date; a lasting difference means it is behind.",
        ["status"],
    )
    total = 0
    for status in JobStatus:
        diff = mirror.jobs.get(status, 0) - zk.by_status.get(status, 0)
        total += abs(diff)
        drift.add_metric([status], diff)
    yield drift
    lag = gauge(
        "mq_mirror_lag_jobs",
        "Sum over the statuses of the mirror's difference from the tree, in jobs.",
    )
    lag.add_metric([], total)
    yield lag


# --- notifications ----------------------------------------------------------------


@dataclass
class NotificationFacts:
    deliveries: dict[tuple[str, str], int] = field(default_factory=dict)  # (channel, status)
    oldest_pending: dict[str, float] = field(default_factory=dict)  # channel -> age in seconds


def read_notifications() -> NotificationFacts:
    """Two aggregate queries over the deliveries, whatever their number."""
    from notifications.models import PENDING, Delivery

    facts = NotificationFacts()
    counted = Delivery.objects.values_list("subscription__channel", "status").annotate(
        n=Count("id")
    )
    for channel, status, n in counted.order_by():
        facts.deliveries[(channel, status)] = n
    now = timezone.now()
    oldest = (
        Delivery.objects.filter(status=PENDING)
        .values_list("subscription__channel")
        .annotate(first=Min("created"))
        .order_by()
    )
    for channel, first in oldest:
        facts.oldest_pending[channel] = max(0.0, (now - first).total_seconds())
    return facts


def notification_metrics(facts: NotificationFacts | None) -> Iterator[Metric]:
    """Depositors' notifications: deliveries by channel and status, and how long the oldest
    one still to be delivered has waited (a receiver that keeps failing shows here)."""
    if facts is None:
        return
    deliveries = gauge(
        "mq_notification_deliveries",
        "Notification deliveries by channel (webhook, email) and status (pending, delivered, "
        "failed).",
        ["channel", "status"],
    )
    for (channel, status), n in sorted(facts.deliveries.items()):
        deliveries.add_metric([channel, status], n)
    yield deliveries
    oldest = gauge(
        "mq_notification_oldest_pending_seconds",
        "Age of the oldest notification not yet delivered nor given up, by channel.",
        ["channel"],
    )
    for channel, age in sorted(facts.oldest_pending.items()):
        oldest.add_metric([channel], age)
    yield oldest


# --- the collector ----------------------------------------------------------------


class QueueCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        timeout = settings.MQ_METRICS_TIMEOUT
        zk = zookeeper_within(timeout)
        session = runtime.client_state()
        try:
            facts = read_mirror()
            mirror: MirrorFacts | None = facts
            notifications: NotificationFacts | None = read_notifications()
            # Stalled jobs and capacity ahead: the same code as the pages (metrics.foresight).
            foresight = read_foresight(facts.jobs)
            access_counts: dict[tuple[str, str], int] | None = read_counts()
        except DatabaseError as e:
            log.warning("/metrics: the mirror database is away: %r", e)
            mirror = notifications = access_counts = None
            foresight = []
        try:
            redis: RedisFacts | None = read_redis(timeout)
        except Exception as e:  # refused, timed out, a Sentinel with no master
            log.warning("/metrics: Redis not read: %r", e)
            redis = None
        yield from mirror_metrics(mirror)
        yield from redis_metrics(redis)
        yield from zookeeper_metrics(zk, session)
        yield from lag_metrics(mirror, zk)
        yield from notification_metrics(notifications)
        yield from foresight
        yield from breaker_metrics(zk.breakers if zk else None)
        yield from access_metrics(access_counts, zk.access_paused if zk else None)
