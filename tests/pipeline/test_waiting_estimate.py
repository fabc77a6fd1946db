"""The estimate of when a queued job starts and finishes, checked against what happened: a
real queue (ZooKeeper, Redis, RQ workers, a content server) runs a batch to measure its
pace, then takes a second one; the last job's estimate, made as it was queued, is compared
with when it really started and finished, within a generous factor (never a time bound)."""

from __future__ import annotations

import time

from rq import Queue, SimpleWorker

from jobs.models import Job, JobEvent
from jobs.waitorder import job_waiting
from merritt_queue.core import waiting as w
from merritt_queue.core.dispatcher import Dispatcher, DispatcherConfig
from merritt_queue.core.queues import BATCH_PENDING_QUEUE
from merritt_queue.project.tasks import TASKS

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

JOBS = 12
# The estimate may be this many times too short or too long: the pace is one batch's, on a
# machine shared with other work.
FACTOR = 5


def manifest(content, name: str) -> str:
    """A single-file batch manifest of ``JOBS`` files served by ``content``."""
    rows = [
        "#%checkm_0.7",
        "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest",
        "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#",
        "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | "
        "nfo:fileLastModified | nfo:fileName",
    ]
    rows += [f"{content.url}/call911.jpg |  |  |  |  | {name}-{n}.jpg" for n in range(JOBS)]
    (content.root / f"{name}.checkm").write_text("\n".join([*rows, "#%eof", ""]))
    return f"{content.url}/{name}.checkm"


def turn_into_jobs(pipeline, bid: str) -> None:
    """Only the batch's own step: its jobs are made and queued, none runs yet."""
    Dispatcher(pipeline.store, pipeline.redis, TASKS, DispatcherConfig(ahead=50)).sweep()
    queue = Queue(BATCH_PENDING_QUEUE, connection=pipeline.redis)
    SimpleWorker([queue], connection=pipeline.redis).work(burst=True, logging_level="WARNING")
    assert Job.objects.filter(batch_id=bid).count() == JOBS


# The timeline's times are whole seconds (Merritt's format): what happened is known to a second.
RESOLUTION = 1.0


def within(estimated: float, happened: float) -> bool:
    low, high = max(0.0, happened - RESOLUTION), happened + RESOLUTION
    return low / FACTOR <= estimated <= high * FACTOR


def test_the_last_jobs_estimate_holds_against_what_happened(pipeline, content):
    first = pipeline.submit(
        type="single-file-batch-manifest", payload_url=manifest(content, "first")
    )
    assert pipeline.run(first, timeout=120).status == "Completed"
    second = pipeline.submit(
        type="single-file-batch-manifest", payload_url=manifest(content, "second")
    )
    turn_into_jobs(pipeline, second)
    last = Job.objects.filter(batch_id=second).order_by("-jid").first()
    queued = time.time()
    found = job_waiting(last)
    assert found is not None and found.code == w.WORKER
    order = found.order
    assert order.position == JOBS and order.jobs_ahead == JOBS - 1
    assert order.starts_at is not None and order.finishes_at is not None
    assert pipeline.run(second, timeout=120).status == "Completed"

    def at(status: str) -> float:
        return JobEvent.objects.get(jid=last.jid, to_status=status).at.timestamp()

    started, finished = at("Estimating") - queued, at("Completed") - queued
    expect_start = order.starts_at.timestamp() - queued
    expect_finish = order.finishes_at.timestamp() - queued
    assert within(expect_start, started), (expect_start, started)
    assert within(expect_finish, finished), (expect_finish, finished)
