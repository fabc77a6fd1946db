"""The queue's capacity: how many jobs a batch, a collection and the whole tree may hold.

ZooKeeper keeps the whole tree in its heap, so every job written costs memory until
``cleanup`` purges it, whatever its status. A submission is refused when it would pass a
limit: 413 for a batch larger than any submission may be, 429 for a quota that frees up as
older jobs are purged. The batch handler checks again when it knows the exact row count (a
manifest given by URL), before it writes a job.

How exact the counts are:

- the tree's count is ZooKeeper's own ``numChildren`` of ``/jobs``, one stat, exact at the
  moment it is read;
- a collection's count comes from the Django mirror, which follows the tree within
  ``MQ_MIRROR_DELAY`` (write-through) or the next reconcile; a few jobs of lag cannot hurt
  ZooKeeper, because the tree's own limit is exact;
- two batches checked at the same moment may both pass, so a limit can be passed by at most
  the jobs of the batches being created at once, each bounded by ``MQ_MAX_BATCH_JOBS``.
  The heap rule of scripts/services.sh leaves room for that.
"""

from __future__ import annotations

import time

from django.conf import settings

from jobs.models import Job
from merritt_queue.core.planning import MANIFEST_KIND, SINGLE_TYPES
from merritt_queue.core.store import QueueStore
from merritt_queue.core.zkstats import znode_count
from merritt_queue.project.runtime import get_store
from pipeline.submitted import SubmissionError

# Share of MQ_MAX_QUEUE_JOBS from which /healthz and the dashboard warn.
WARN_FRACTION = 0.8


class CapacityError(SubmissionError):
    """A submission over a capacity limit; ``status`` is the HTTP answer (413 or 429)."""

    def __init__(self, problems: list[str], status: int):
        super().__init__(problems, status=status)


def check_submission(clean: dict, upload) -> None:
    """At the door: refuse a submission over a limit; QueueError when ZooKeeper is away.

    The row count is known here only for an uploaded batch manifest; one by URL is
    checked again by the batch handler once fetched.
    """
    store = get_store(connected_within=settings.ZK_TIMEOUT)
    kind = clean.get("type")
    rows: int | None = 1
    if kind in MANIFEST_KIND and kind not in SINGLE_TYPES:
        rows = manifest_rows(upload) if upload else None
    check(store, clean.get("collection", ""), rows)


def batch_row_limit() -> int:
    """The most rows (jobs) a batch may have: what a submission is refused past, and what
    checking a manifest judges by, so the two agree."""
    return settings.MQ_MAX_BATCH_JOBS


def collection_jobs(collection: str) -> int:
    """The collection's jobs in the tree, any status (from the mirror; see the module doc)."""
    return Job.objects.filter(collection=collection, removed_at__isnull=True).count()


def check(store: QueueStore, collection: str, rows: int | None, *, new: int | None = None) -> None:
    """Refuse ``rows`` more jobs (``new`` of them not yet in the tree) with CapacityError.

    ``rows`` is the batch's whole size, or None while it is unknown (a manifest given by
    URL); the quotas then check the batch's one row at least.
    """
    batch_limit = batch_row_limit()
    if rows is not None and rows > batch_limit:
        raise CapacityError(
            [
                f"the batch has {rows} rows (jobs); a batch may have at most {batch_limit} "
                "(MQ_MAX_BATCH_JOBS): split it into smaller batches"
            ],
            413,
        )
    adding = new if new is not None else max(rows or 1, 1)
    if adding == 0:
        return  # a rerun after a crash whose jobs were all written already
    problems = []
    in_tree, queue_limit = store.jobs.job_count(), settings.MQ_MAX_QUEUE_JOBS
    if in_tree + adding > queue_limit:
        problems.append(
            f"the queue holds {in_tree} jobs and this batch would add {adding}; it may hold "
            f"at most {queue_limit} (MQ_MAX_QUEUE_JOBS) until finished jobs are cleaned up: "
            "submit again later"
        )
    if collection:
        held, limit = collection_jobs(collection), settings.MQ_MAX_COLLECTION_JOBS
        if held + adding > limit:
            problems.append(
                f"collection {collection} has {held} jobs in the queue and this batch would "
                f"add {adding}; a collection may have at most {limit} "
                "(MQ_MAX_COLLECTION_JOBS) until finished jobs are cleaned up: submit again later"
            )
    if problems:
        raise CapacityError(problems, 429)


def manifest_rows(upload) -> int | None:
    """Rows of an uploaded manifest, counted as the parser counts them (not comments, not
    ``#%`` headers, not blank lines); the file is left at its start.

    None for a file over MQ_MAX_MANIFEST_BYTES, which the batch handler refuses unparsed.
    The batch handler counts again exactly (this count splits lines on LF only).
    """
    if upload.size > settings.MQ_MAX_MANIFEST_BYTES:
        return None
    count = 0
    upload.file.seek(0)
    for line in upload.file:
        stripped = line.strip()
        if stripped and not stripped.startswith(b"#"):
            count += 1
    upload.file.seek(0)
    return count


def usage(jobs: int) -> dict:
    """``jobs`` in the tree against MQ_MAX_QUEUE_JOBS, with ZooKeeper's own znode count
    (None when unknown), for /healthz and the dashboard."""
    limit = settings.MQ_MAX_QUEUE_JOBS
    return {
        "jobs": jobs,
        "max_jobs": limit,
        "percent": round(100 * jobs / limit, 1),
        "warning": jobs >= WARN_FRACTION * limit,
        "znodes": _znodes(),
    }


# ZooKeeper's figure changes slowly; a dashboard refreshing every few seconds, or a probe,
# need not ask each time.
ZNODES_CACHE_SECONDS = 10.0
_znodes_seen: tuple[str, float, int | None] = ("", 0.0, None)


def _znodes() -> int | None:
    global _znodes_seen
    hosts, at, count = _znodes_seen
    now = time.monotonic()
    if hosts != settings.ZK_HOSTS or now - at > ZNODES_CACHE_SECONDS:
        count = znode_count(settings.ZK_HOSTS)
        _znodes_seen = (settings.ZK_HOSTS, now, count)
    return count
