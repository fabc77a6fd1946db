"""Job pages: the list and one job. They read the mirror; only ``?live=1`` asks ZooKeeper."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest, HttpResponseForbidden
from django.shortcuts import get_object_or_404, render

from batches.models import Batch
from jobs import history_export, merrittnotes, reviewview, stalls, steps_view
from jobs.filters import JobFilter
from jobs.models import Job, awaiting_review
from jobs.tables import SelectJobTable, job_rows
from jobs.timeline_view import job_timeline
from jobs.waitcells import waiting_context
from jobs.waitorder import job_waiting
from merritt_queue.core.errors import NotFound, QueueError, ZooKeeperUnreachable
from merritt_queue.core.states import JobStatus, resume_known, resume_target
from merritt_queue.core.tree import is_job_id, parse_timestamp
from merritt_queue.deposit.uploads import shown_payload
from merritt_queue.project import runtime
from mirror.facade import LOCAL_ID_SEPARATOR
from ui import quarantine
from ui.cells import when
from ui.fields import as_text, fields_of
from ui.listing import collection_names, filtered_table, record_links
from ui.reading_scope import readable_collections, readable_rows, require_readable
from ui.removals import removal_of_row, removed_page

log = logging.getLogger(__name__)

MAX_WORK_FILES = 500


# --- the list ---------------------------------------------------------------------------


@login_required
def job_list(request):
    # Within a last-change range, the most recent change comes first: the index that finds
    # the range then also gives the order, however wide the range.
    by_change = "last_modified_after" in request.GET or "last_modified_before" in request.GET
    filterset, table = filtered_table(
        request,
        JobFilter,
        readable_rows(request.user, job_rows()),
        SelectJobTable,
        "-last_modified" if by_change else None,
    )
    return render(
        request,
        "jobs/job_list.html",
        {
            "filter": filterset,
            "table": table,
            "collections": collection_names(request.user),
            "record": record_links(request, collection="collection", batch="bid"),
            # Listing the stalled jobs: the steps it cannot judge yet (jobs.stalls).
            "unjudged": stalls.unjudged_states() if request.GET.get("stalled") == "1" else [],
            "stall_days": settings.MQ_STALL_WINDOW_DAYS,
        },
    )


# --- one job ----------------------------------------------------------------------------


def failed_step(job: Job) -> str | None:
    """The step a Failed job failed in: the successor of its last successful status (None
    when that status does not say, as after Merritt requeued it)."""
    last = job.last_successful_status or None
    if job.status != JobStatus.FAILED or (last is not None and not resume_known(last)):
        return None
    return resume_target(last)


@dataclass(frozen=True)
class WorkFile:
    name: str
    size: int | None
    link: bool


def working_files(jid: str, limit: int = MAX_WORK_FILES) -> tuple[list[WorkFile] | None, bool]:
    """Files under the job's work directory, at most ``limit``; no symlink is followed.

    Returns ``(None, False)`` when there is no directory, else ``(files, truncated)``.
    Directories count toward a budget too, so a deep empty tree cannot stall the page.
    """
    if not is_job_id(jid):
        return None, False
    root = Path(settings.MQ_WORK_DIR) / "jobs" / jid
    if root.is_symlink() or not root.is_dir():
        return None, False
    files: list[WorkFile] = []
    dirs, budget = [root], 10 * limit
    while dirs:
        current = dirs.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    budget -= 1
                    if len(files) >= limit or budget < 0:
                        return sorted(files, key=lambda f: f.name), True
                    name = os.path.relpath(entry.path, root)
                    try:
                        if entry.is_symlink():
                            files.append(WorkFile(name, None, True))
                        elif entry.is_dir(follow_symlinks=False):
                            dirs.append(Path(entry.path))
                        else:
                            size = entry.stat(follow_symlinks=False).st_size
                            files.append(WorkFile(name, size, False))
                    except OSError:  # removed while we looked: the job moved on
                        continue
        except OSError:  # removed or unreadable while we looked
            continue
    return sorted(files, key=lambda f: f.name), False


@dataclass(frozen=True)
class LiveRow:
    node: str
    field: str
    mirror: str
    live: str
    differs: bool


def _json_or_none(value):
    return value or None  # {} and null both mean "nothing there"


def live_rows(job: Job, record) -> list[LiveRow]:
    """The mirror's values beside ZooKeeper's, node by node, marking those that differ."""
    node = f"/jobs/{job.jid}/"
    mirror_time = job.last_modified
    live_time = parse_timestamp(record.last_modified)
    pairs = [
        ("bid", "", job.batch_id or None, record.bid),
        ("priority", "", job.priority, record.priority),
        ("space_needed", "", job.space_needed, record.space_needed),
        ("status", "status", job.status, record.status),
        (
            "status",
            "last_successful_status",
            job.last_successful_status or None,
            record.last_successful_status or None,
        ),
        ("status", "retry_count", job.retry_count, record.retry_count),
        ("status", "message", job.message, record.message),
        ("status", "version", job.status_version, record.status_version),
        ("lock", "held", job.locked, record.locked),
    ]
    for name in ("configuration", "identifiers", "metadata", "inventory"):
        pairs.append(
            (name, "", _json_or_none(getattr(job, name)), _json_or_none(getattr(record, name)))
        )
    stores = (merrittnotes.shown_store(job.store), merrittnotes.shown_store(record.store))
    pairs.append(("store", "", *map(_json_or_none, stores)))
    rows = [
        LiveRow(node + name, field, _show(mine), _show(theirs), mine != theirs)
        for name, field, mine, theirs in pairs
    ]
    # ZooKeeper keeps whole seconds; compare the instants, not their spelling.
    if live_time and mirror_time:
        time_differs = mirror_time.replace(microsecond=0) != live_time
    else:  # equal only when neither has a time
        time_differs = mirror_time is not None or bool(record.last_modified)
    rows.insert(
        4,
        LiveRow(
            node + "status",
            "last_modified",
            when(mirror_time),
            when(record.last_modified),
            time_differs,
        ),
    )
    return rows


def _show(value) -> str:
    if value is None:
        return "null"
    return as_text(value)


def live_state(job: Job) -> dict:
    """One read of the job in ZooKeeper; a failure becomes a message, never a 500."""
    try:
        record = runtime.get_store(init=False).jobs.get_job(job.jid)
    except NotFound:
        return {
            "error": f"ZooKeeper has no job {job.jid}: it has been removed since the mirror "
            "last saw it (cleanup), or it was never completely created."
        }
    except ZooKeeperUnreachable:
        return {
            "error": "ZooKeeper could not be reached, so the live state cannot be shown "
            "(no connection within MQ_WEB_ZK_WAIT). The values above are the mirror's copy."
        }
    except QueueError as e:
        return {"error": f"ZooKeeper holds this job, but it cannot be read: {e}"}
    except Exception as e:  # kazoo raises many kinds: timeout, connection loss, closed...
        log.warning("live read of %s failed: %r", job.jid, e)
        return {
            "error": "ZooKeeper could not be reached, so the live state cannot be shown "
            f"({type(e).__name__}: {str(e) or 'no answer'}). "
            "The values above are the mirror's copy."
        }
    rows = live_rows(job, record)
    return {"rows": rows, "differences": sum(r.differs for r in rows)}


@login_required
def job_detail(request, jid: str):
    job = Job.objects.filter(jid=jid).first()
    if job is None:
        return removed_page(request, "job", jid)
    require_readable(request.user, job.collection)
    batch = (
        Batch.objects.filter(bid=job.batch_id).only("bid", "status", "title").first()
        if job.batch_id
        else None
    )
    files, files_truncated = working_files(job.jid)
    verdict = stalls.verdict_of(job)
    context = {
        "stall": verdict,
        "stall_words": stalls.words(verdict) if verdict else "",
        "job": job,
        "batch": batch,
        "failed_step": failed_step(job),
        "quarantine": quarantine.of([job.jid]).get(job.jid),
        "local_ids": job.local_id.split(LOCAL_ID_SEPARATOR) if job.local_id else [],
        "timeline": job_timeline(job),
        "steps": steps_view.job_steps(request.user, job),
        "configuration": fields_of(shown_payload(job.configuration)),
        "identifiers": fields_of(job.identifiers),
        "metadata": fields_of(job.metadata),
        "store": fields_of(merrittnotes.shown_store(reviewview.without_review(job.store))),
        "review": reviewview.review_context(
            job.store, Job.objects.filter(awaiting_review(), pk=job.pk).exists()
        ),
        "inventory": fields_of(job.inventory),
        "files": files,
        "files_truncated": files_truncated,
        "max_files": MAX_WORK_FILES,
        "live": live_state(job) if request.GET.get("live") == "1" else None,
        "merritt_holder": merrittnotes.holder(job.configuration, job.status),
        "merritt_failure": merrittnotes.failure_note(
            job.configuration, job.status, job.last_successful_status, job.store, job.inventory
        ),
        **waiting_context(job_waiting(job), request.user),
        "removal": removal_of_row("job", job.jid, job.batch_id or "") if job.removed_at else None,
    }
    return render(request, "jobs/job_detail.html", context)


# --- the record as CSV and JSON -------------------------------------------------------


@login_required
def job_history_export(request, jid: str, fmt: str):
    job = get_object_or_404(Job.objects.only("jid", "collection"), jid=jid)
    require_readable(request.user, job.collection)
    filters = history_export.Filters(jid=job.jid)
    return history_export.response(fmt, filters, None, f"{job.jid}-history")


@login_required
def job_steps_export(request, jid: str):
    """What each step did, as JSON (docs/history.md)."""
    job = get_object_or_404(Job.objects.only("jid", "collection", "batch"), jid=jid)
    require_readable(request.user, job.collection)
    return steps_view.export(request.user, job)


@login_required
def history_export_all(request, fmt: str):
    """The whole record, or the part the filters select (docs/history.md)."""
    try:
        filters = history_export.parse_filters(request.GET)
    except history_export.ExportError as e:
        return HttpResponseBadRequest(f"{e}\n", content_type="text/plain; charset=utf-8")
    readable = readable_collections(request.user)
    if readable is not None and filters.collection and filters.collection not in readable:
        return HttpResponseForbidden(
            f"collection: {filters.collection} is not among the collections you may read\n",
            content_type="text/plain; charset=utf-8",
        )
    return history_export.response(fmt, filters, readable, "history")
