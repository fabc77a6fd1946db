"""Where a deposit stands, over the API: a batch (by its bid or the depositor's batchID) and a
job, as JSON, for a bearer token.

Read from the mirror tables only, as the pages are, and within the token's user's reading
scope (ui.reading_scope). An item the user may not read answers 404, exactly like one that
does not exist, so a token of one collection cannot confirm the ids of another.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.http import JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_safe

from batches.models import Batch, BatchEvent
from door.tokens import with_token_user
from jobs import stalls
from jobs.deliveries_view import job_deliveries
from jobs.models import Job, JobEvent
from jobs.steps_view import record_for
from jobs.timeline_view import who_of
from jobs.waitcells import sees_names
from jobs.waitorder import batch_waiting, job_waiting
from merritt_queue.core.steprecord import public
from merritt_queue.core.tree import is_batch_id, is_job_id
from mirror.facade import LOCAL_ID_SEPARATOR
from ui.reading_scope import may_read, readable_collections

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
JOB_ROW_FIELDS = ("jid", "status", "message", "ark", "local_id", "last_modified")


def _utc(value: datetime | None) -> str | None:
    """ISO 8601 in UTC, whatever zone the site shows its pages in."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _local_ids(job: Job) -> list[str]:
    return job.local_id.split(LOCAL_ID_SEPARATOR) if job.local_id else []


def _not_found(kind: str, given: str) -> JsonResponse:
    """The same answer for an item that does not exist and one the token may not read."""
    return JsonResponse(
        {
            "errors": [
                f"no {kind} {given[:100]!r} is known to this token: the id may be wrong, "
                "belong to a collection the token's user may not read, or be so new that "
                "the queue's record has not caught up with it yet"
            ]
        },
        status=404,
    )


def _history(events, with_retries: bool) -> list[dict]:
    """The item's status changes in version order, as the history exports spell them."""
    rows = []
    for e in events:
        row = {
            "version": e.status_version,
            "at": _utc(e.at),
            "from_status": e.from_status,
            "to_status": e.to_status,
            "message": e.message,
            "actor": e.actor,
            "who": who_of(e.actor).text if e.actor else "",
        }
        if with_retries:
            row["retry_count"] = e.retry_count
        rows.append(row)
    return rows


def _waiting(found, user) -> dict | None:
    """Why the item waits (docs/usage.md, "Why a job waits"); null when it does not."""
    return found.as_json(public=not sees_names(user)) if found else None


def _page_params(request) -> tuple[int, str, list[str]]:
    """``limit`` and ``after`` (the last jid of the page before), and what is wrong in them."""
    problems = []
    text = request.GET.get("limit", "").strip()
    limit = DEFAULT_LIMIT
    if text:
        # isdigit() alone holds for '²' (which int() refuses) and other scripts' digits.
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_LIMIT:
            problems.append(f"limit must be a whole number from 1 to {MAX_LIMIT}")
        else:
            limit = int(text)
    after = request.GET.get("after", "").strip()
    if after and not is_job_id(after):
        problems.append(f"after: {after[:40]!r} is not a job id (jid and 10 digits)")
    return limit, after, problems


def _batch_body(request, user, batch: Batch) -> JsonResponse:
    limit, after, problems = _page_params(request)
    if problems:
        return JsonResponse({"errors": problems}, status=400)
    jobs = Job.objects.filter(batch_id=batch.bid).only(*JOB_ROW_FIELDS).order_by("jid")
    if after:
        jobs = jobs.filter(jid__gt=after)
    page = list(jobs[: limit + 1])
    following = None
    if len(page) > limit:
        page = page[:limit]
        query = urlencode({"limit": limit, "after": page[-1].jid})
        path = reverse("batches:api-batch", args=[batch.bid])
        following = request.build_absolute_uri(f"{path}?{query}")
    events = BatchEvent.objects.filter(bid=batch.bid).order_by("status_version")
    body = {
        "bid": batch.bid,
        "batchID": batch.uuid or None,
        "status": batch.status,
        "message": batch.message,
        "collection": batch.collection,
        "submitted": _utc(batch.submitted),
        "last_change": _utc(batch.last_modified),
        "job_total": batch.job_total,
        "jobs": [
            {
                "jid": job.jid,
                "status": job.status,
                "message": job.message,
                "ark": job.ark or None,
                "local_ids": _local_ids(job),
                "last_change": _utc(job.last_modified),
            }
            for job in page
        ],
        "next": following,
        "history": _history(events, with_retries=False),
        "report": batch.status_report if isinstance(batch.status_report, dict) else None,
        "waiting": _waiting(batch_waiting(batch), user),
        "awaiting_approval": batch.awaiting_approval,
    }
    return JsonResponse(body)


@require_safe
@with_token_user
def batch_status(request, user, bid: str):
    batch = Batch.objects.filter(bid=bid).first() if is_batch_id(bid) else None
    if batch is None or not may_read(user, batch.collection):
        return _not_found("batch", bid)
    return _batch_body(request, user, batch)


@require_safe
@with_token_user
def batch_status_by_batch_id(request, user, batch_id: str):
    """The batch a depositor named with their own ``batchID`` when submitting it."""
    allowed = readable_collections(user)
    batches = Batch.objects.filter(uuid=batch_id).order_by("bid")
    if allowed is not None:
        batches = batches.filter(collection__in=allowed)
    batch = batches.first()
    if batch is None:
        return _not_found("batch with batchID", batch_id)
    return _batch_body(request, user, batch)


@require_safe
@with_token_user
def job_status(request, user, jid: str):
    job = Job.objects.filter(jid=jid).first() if is_job_id(jid) else None
    if job is None or not may_read(user, job.collection):
        return _not_found("job", jid)
    events = JobEvent.objects.filter(jid=job.jid).order_by("status_version")
    body: dict[str, Any] = {
        "jid": job.jid,
        "bid": job.batch_id or None,
        "status": job.status,
        "message": job.message,
        "ark": job.ark or None,
        "local_ids": _local_ids(job),
        "retries": job.retry_count,
        "last_change": _utc(job.last_modified),
        "history": _history(events, with_retries=True),
        "waiting": _waiting(job_waiting(job), user),
    }
    verdict = stalls.verdict_of(job)  # while it is in a step: how long, and how long usually
    if verdict is not None:
        body["step_time"] = stalls.as_fields(verdict)
    # What each step did, as a depositor may read it: never an internal address.
    record = record_for(job.jid)
    body["steps"] = public(record) if record is not None else None
    body["notifications"] = job_deliveries(job.batch_id, job.jid, everything=False)
    return JsonResponse(body)
