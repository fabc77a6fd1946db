"""A destructive update's review outside the pages: what the API and ``approve_update`` show
of a job, and the decision taken as the same audited admin action the pages take
(``steering.actions.execution``), on the status version shown.

The API is two calls, as the pages are two pages: ``GET`` shows the diff and, to a person who
may decide, a signed ``confirm`` naming the job, its version and a token; ``POST`` with it
and a reason decides once. A job that moved since is skipped (stale), and the same
``confirm`` posted twice returns the first action's result.
"""

from __future__ import annotations

import uuid

from django.core import signing
from django.core.exceptions import PermissionDenied

from merritt_queue.core import review
from merritt_queue.core.errors import NotFound
from merritt_queue.project.runtime import get_store
from steering.actions import reviews
from steering.actions.catalog import ACTIONS
from steering.actions.execution import execute
from steering.actions.kinds import Target
from steering.models import AdminAction
from steering.permissions import collections_of, refusal

SALT = "steering.reviewdoor"
MAX_AGE = 6 * 3600
DECISIONS = {"approve": reviews.APPROVE, "reject": reviews.REJECT}


class Refused(Exception):
    def __init__(self, problem: str, status: int = 409):
        super().__init__(problem)
        self.status = status


def read(jid: str):
    """The job as ZooKeeper holds it now, and its collection."""
    store = get_store(init=False)
    try:
        job = store.jobs.get_job(jid)
    except NotFound:
        raise Refused(f"no job {jid[:100]!r} is in the queue", 404) from None
    return job, store.holds.item_collection(job.configuration)


def why_not(user, job, collection: str, name: str) -> str | None:
    """Why ``user`` may not take the review action ``name`` on ``job`` now, or None."""
    action = ACTIONS[name]
    if problem := refusal(user, action):
        return problem
    target = Target(job.jid, job.status, job.status_version, collection, job.locked)
    if problem := action.check(target, collections_of(user)):
        return problem
    return None if review.awaiting(job) else reviews.NOT_AWAITING


def shown(user, job, collection: str) -> dict:
    """The job's review as the API answers it, with a ``confirm`` when ``user`` may decide."""
    body = {
        "job_id": job.jid,
        "status": job.status,
        "status_version": job.status_version,
        "awaiting_approval": review.awaiting(job),
        "review": review.review_of(job),
    }
    problem = why_not(user, job, collection, reviews.APPROVE)
    if problem is None:
        data = {"jid": job.jid, "version": job.status_version, "user": user.pk}
        body["confirm"] = signing.dumps(data | {"token": uuid.uuid4().hex}, salt=SALT)
    else:
        body["may_decide"] = problem
    return body


def confirmed(user, jid: str, confirm: str) -> dict:
    """The signed ``confirm`` of ``shown``, checked to be this person's, for this job."""
    try:
        data = signing.loads(confirm, salt=SALT, max_age=MAX_AGE)
    except signing.SignatureExpired:
        raise Refused("this confirm value is too old: read the job's review again", 400) from None
    except signing.BadSignature:
        raise Refused("the confirm value was altered or is not valid", 400) from None
    if data.get("user") != user.pk or data.get("jid") != jid:
        raise Refused("this confirm value was made for another person or job", 400)
    return data


def decide(
    user, jid: str, decision: str, reason: str, *, version: int, token: str
) -> tuple[AdminAction, bool]:
    """Approve or reject on the version shown, audited; the action, and whether it was taken
    before (the same token)."""
    if decision not in DECISIONS:
        raise Refused(f"decision must be approve or reject, not {decision[:40]!r}", 400)
    if not reason.strip():
        raise Refused("a reason is required (it is recorded in the audit trail)", 400)
    used = AdminAction.objects.filter(token=token).first()
    if used is not None:
        return used, True
    action = ACTIONS[DECISIONS[decision]]
    try:
        record = execute(user, action, [(jid, version)], reason, token=token)
    except PermissionDenied as e:
        raise Refused(str(e), 403) from None
    return record, False


def outcome(record: AdminAction, repeated: bool) -> dict:
    item = record.items.filter(part_of="").order_by("id").first()
    return {
        "admin_action": record.pk,
        "action": record.action,
        "repeated": repeated,
        "result": item.result if item else "",
        "detail": item.detail if item else "",
        "status": item.after_status if item else "",
    }
