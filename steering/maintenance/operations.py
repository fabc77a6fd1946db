"""Maintenance from the web: the consistency check, the full reconcile and cleanup, each an
audited admin action run on the ``mq-admin`` queue with a progress bar.

They run the very functions their commands run (``merritt_queue.project.treecheck``,
``mirror.facade.full_reconcile``, ``steering.maintenance.cleanup``); here the progress and the
report go to the ``AdminAction`` row instead of a terminal. One operation of a kind runs at a
time: the database refuses a second unfinished row of the same action (``AdminAction.Meta``). An
operation that cannot run (ZooKeeper, Redis or the database gone) is finished with the reason
on its row; what it did before that is kept (a cleanup's removed items).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from redis import Redis
from redis.exceptions import RedisError
from rq.exceptions import NoSuchJobError
from rq.job import Job as RQJob
from rq.job import JobStatus as RQStatus

from merritt_queue.core.errors import QueueError
from merritt_queue.core.history import admin_actor
from merritt_queue.project import treecheck
from merritt_queue.project.runtime import get_store
from mirror import facade as mirror
from steering import tasks
from steering.maintenance import cleanup
from steering.models import MAINTENANCE, AdminAction, AdminActionItem
from steering.permissions import Role, role_of

log = logging.getLogger(__name__)

CHECK, RECONCILE, CLEANUP = MAINTENANCE
TASK = "steering.maintenance.run_operation"
# Findings kept on the action's row; the /consistency/ page keeps more.
KEPT_FINDINGS = 500
# Seconds between two progress writes: the bar moves, the database is not hammered.
PROGRESS_SECONDS = 0.5
# A record this young may not have its RQ job yet: never judged dead before.
QUEUEING = timedelta(minutes=1)


@dataclass(frozen=True)
class Operation:
    name: str
    label: str
    role: Role = Role.ADMINISTRATOR


OPERATIONS = {
    CHECK: Operation(CHECK, "Check the tree"),
    RECONCILE: Operation(RECONCILE, "Rebuild the mirror"),
    CLEANUP: Operation(CLEANUP, "Clean up"),
}


class AlreadyRunning(Exception):
    """An operation of this kind is running; ``record`` is it."""

    def __init__(self, record: AdminAction):
        super().__init__(f"{record.action} is already running (action {record.pk})")
        self.record = record


def refusal(user, op: Operation) -> str | None:
    if settings.READ_ONLY:
        return (
            "the queue is read-only at the moment (set by the site's administrators): "
            "no action can be taken"
        )
    if role_of(user) < op.role:
        return f"{op.label} needs the {op.role} role"
    return None


def running(name: str) -> AdminAction | None:
    """The unfinished operation of this kind, unless its worker is known to have died (then it
    is finished as failed, and None)."""
    record = AdminAction.objects.filter(action=name, finished__isnull=True).first()
    if record is None or _alive(record):
        return record
    fail(record, "its worker stopped before it finished (the RQ job is gone or failed)")
    return None


def _alive(record: AdminAction) -> bool:
    """Whether the record's RQ job may still run it; True when Redis cannot say, and while
    the record is too young for its job to be queued yet."""
    if timezone.now() - record.started < QUEUEING:
        return True
    try:
        job = RQJob.fetch(job_id(record), connection=_redis())
        status = job.get_status(refresh=False)
    except NoSuchJobError:
        return False
    except (RedisError, OSError):
        return True
    return status not in (RQStatus.FINISHED, RQStatus.FAILED, RQStatus.STOPPED, RQStatus.CANCELED)


def start(
    user, op: Operation, params: dict, reason: str, *, token: str
) -> tuple[AdminAction, bool]:
    """Record the operation and queue it; the record and whether it is new (False: the token
    was used already, nothing more is done). AlreadyRunning when one of its kind runs."""
    made, new = prepare(user, op, params, reason, token=token)
    if new:
        queue(made)
    return made, new


def prepare(
    user, op: Operation, params: dict, reason: str, *, token: str
) -> tuple[AdminAction, bool]:
    """``start`` without queueing: for a caller whose transaction must commit first (the
    worker reads the record), which then calls ``queue``."""
    problem = refusal(user, op)
    if problem:
        raise PermissionDenied(problem)
    if not reason.strip():
        raise ValueError("a reason is required")
    used = AdminAction.objects.filter(token=token).first()
    if used is not None:
        return used, False
    other = running(op.name)
    if other is not None:
        raise AlreadyRunning(other)
    try:
        with transaction.atomic():
            made = AdminAction.objects.create(
                user=user,
                username=user.get_username(),
                action=op.name,
                scope="queue",
                reason=reason.strip(),
                params=params,
                token=token,
            )
    except IntegrityError:  # a double submit, or another start, won the race
        used = AdminAction.objects.filter(token=token).first()
        if used is not None:
            return used, False
        other = AdminAction.objects.get(action=op.name, finished__isnull=True)
        raise AlreadyRunning(other) from None
    return made, True


def queue(made: AdminAction) -> None:
    """Queue the recorded operation on mq-admin; failed, saying why, when Redis is away."""
    try:
        tasks.enqueue(made, _redis(), TASK, job_id(made))
    except (RedisError, OSError) as e:
        fail(made, f"it could not be queued: Redis did not answer ({e}); nothing was done")


def job_id(record: AdminAction) -> str:
    return f"mq-maintenance-{record.pk}"


def _redis() -> Redis:
    import django_rq

    return django_rq.get_connection("default")


def fail(record: AdminAction, why: str) -> AdminAction:
    """Finish ``record`` as failed, saying why; what it did before stays recorded."""
    record.report = {**(record.report or {}), "error": why}
    record.failed += 1
    record.finished = timezone.now()
    record.save(update_fields=["report", "failed", "finished"])
    return record


# --- running (on a worker of mq-admin) ------------------------------------------------------


class Meter:
    """The progress callback the operations are given: the row's total and done, written at
    most every ``PROGRESS_SECONDS``."""

    def __init__(self, record: AdminAction):
        self.record, self.last = record, 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < PROGRESS_SECONDS:
            return
        self.last = now
        self.record.total, self.record.done = total, min(done, total)
        AdminAction.objects.filter(pk=self.record.pk).update(total=total, done=min(done, total))


@tasks.on_worker
def run_operation(action_id: int) -> str:
    """Run maintenance action ``action_id``; a no-op once it is finished."""
    record = AdminAction.objects.filter(pk=action_id).first()
    if record is None:
        return "gone"
    if record.finished is not None:
        return "already finished"
    user = record.user
    problem = refusal(user, OPERATIONS[record.action]) if user else "the person is gone"
    if problem:  # as every admin action, judged again when it runs
        fail(record, f"not run: {problem}")
        return "refused"
    try:
        RUNNERS[record.action](record, Meter(record))
    except Exception as e:  # the row must say why, whatever it was
        log.exception("maintenance action %s failed", action_id)
        fail(record, explain(e))
        return "failed"
    record.finished = timezone.now()
    record.save(update_fields=["total", "done", "skipped", "failed", "report", "finished"])
    return "done"


def explain(e: Exception) -> str:
    """Why an operation stopped, as the person reads it."""
    if isinstance(e, KazooTimeoutError):
        return f"ZooKeeper ({settings.ZK_HOSTS}) did not answer; nothing more was done"
    if isinstance(e, KazooException):
        return f"ZooKeeper went away mid-way ({type(e).__name__}); nothing more was done"
    if isinstance(e, QueueError):
        return f"{e}; nothing more was done"
    return f"{type(e).__name__}: {e}; nothing more was done"


def _finish_counts(record: AdminAction) -> None:
    record.done = record.total = max(record.total, record.done)


def _check(record: AdminAction, meter: Meter) -> None:
    params = record.params
    repair, max_age = bool(params.get("repair")), float(params["lock_max_age"])
    findings = treecheck.run_check(
        repair=repair, max_age=max_age, progress=meter, actor=admin_actor(record.username)
    )
    try:
        treecheck.save_findings(findings, repair, max_age)
        saved = ""
    except Exception as e:  # the report on the row matters more than the page
        saved = f"not saved for the Consistency page: {e}"
    ordered = sorted(findings, key=lambda f: (f.repaired, f.kind, f.path))
    record.report = {
        **treecheck.summary(findings, repair, max_age),
        "findings": [
            {**asdict(f), "outcome": treecheck.outcome(f, repair)} for f in ordered[:KEPT_FINDINGS]
        ],
        "truncated": len(findings) > KEPT_FINDINGS,
        "saved": saved,
    }
    _finish_counts(record)


def _reconcile(record: AdminAction, meter: Meter) -> None:
    drift = mirror.full_reconcile(get_store(), progress=meter)
    record.report = mirror.kept_report(drift)
    _finish_counts(record)


def _cleanup(record: AdminAction, meter: Meter) -> None:
    older_than, dry_run = record.params["older_than"], bool(record.params.get("dry_run"))
    cutoff = timezone.now() - cleanup.age(older_than)
    allowed = None
    if only_from := record.params.get("only_from"):  # an approved request: its dry run's rows
        allowed = cleanup.allowed_by(AdminActionItem.objects.filter(admin_action_id=only_from))
        cutoff = parse_datetime(record.params.get("cutoff") or "") or cutoff
    run = cleanup.Cleanup(
        get_store(),
        cutoff,
        dry_run=dry_run,
        progress=meter,
        actor=admin_actor(record.username),
        allowed=allowed,
    )
    try:
        run.run()
    finally:  # what was removed before a failure is recorded all the same
        for row in run.rows:
            row.admin_action = record
        AdminActionItem.objects.bulk_create(run.rows, batch_size=500)
        found = cleanup.counts(run.rows)
        record.report = {
            "dry_run": dry_run,
            "older_than": older_than,
            "cutoff": cutoff.isoformat(),
            "counts": found,
        }
        record.total = len(run.rows)
        record.failed, record.skipped = found["failed"], found["skipped"]
        record.done = record.total - record.failed - record.skipped
        record.save(update_fields=["total", "done", "skipped", "failed", "report"])


RUNNERS: dict[str, Callable[[AdminAction, Meter], None]] = {
    CHECK: _check,
    RECONCILE: _reconcile,
    CLEANUP: _cleanup,
}


def last_dry_run(older_than: str, within: timedelta) -> AdminAction | None:
    """The newest finished dry-run cleanup with this cutoff age, not older than ``within``,
    that did not fail: what a real cleanup's confirmation shows."""
    return (
        AdminAction.objects.filter(
            action=CLEANUP,
            params__dry_run=True,
            params__older_than=older_than,
            finished__isnull=False,
            finished__gte=timezone.now() - within,
            failed=0,
        )
        .order_by("-finished")
        .first()
    )
