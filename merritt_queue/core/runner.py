"""Running the steps of a job: lock, re-check, run the handler, commit, unlock.

Guarantees:

- At most one worker runs a given job's step at a time (the ephemeral lock).
- The outcome commits in the same multi that drops the lock, and only if the
  job is still at the status version read under the lock and the session that
  took the lock is still alive; otherwise nothing is written and the step runs
  again elsewhere. Handlers make their own side effects idempotent (a stored
  version keyed by job id, an ARK saved before use), so a repeated step never
  stores or mints twice.
- Each run of a handler is an attempt (``attempt``), current in its thread while it runs:
  the handler's side effects outside ZooKeeper pass its fence, so a step whose worker was
  cut off from ZooKeeper starts nothing more, and abandons once its session is gone.
- A handler's exception fails the job with a message, never loses it.
- A resumed job that completes in a Failed batch has the batch reported again when that
  makes its report out of date (``store.followups.follow_jobs``), once, however many workers ask.
- What each attempt did (``steplog``, told by the adapters) is kept in the job's ``steps``
  node in its commit's multi; an abandoned attempt's, alone, only while its fence passes.
- A worker may carry a job on through its next steps without unlocking it
  (``ChainPolicy``): each step still commits in its own multi, checked on the
  status version and the lock, and the job is re-checked between steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from . import metrics
from . import steprecord as sr
from . import tree as t
from .attempt import Attempt, running
from .errors import ChangedUnderYou, InvalidData, LockLost, NotFound, QueueError
from .pauseflag import pause_flag
from .reasons import describe
from .records import evolve
from .states import JOB, JobStatus
from .store import ItemLock, JobRecord, QueueStore
from .store.engine import CONNECTION_ERRORS

log = logging.getLogger(__name__)


class Decision(StrEnum):
    """What a handler decided for the job's step."""

    SUCCESS = "success"
    FAIL = "fail"
    LATER = "later"  # stay in the step, run it again after a delay
    MOVE = "move"  # to a status of the handler's choosing


@dataclass(frozen=True)
class Outcome:
    """What a handler decided (``Decision``), with what the commit writes for it."""

    action: Decision
    message: str = ""
    target: str | None = None
    delay: float = 0.0
    # A handler that changed the job's priority passes the record it got back,
    # so the commit moves the index entry it really has.
    job: JobRecord | None = None
    # Data nodes the step found (space needed, storage and inventory data): written in
    # the commit's own multi, only if the step commits.
    data: dict | None = None
    # Item locks the step still holds: deleted in the commit's multi, or released by the
    # runner when the commit fails.
    unlock: tuple[ItemLock, ...] = ()

    @classmethod
    def success(
        cls,
        message: str = "",
        job: JobRecord | None = None,
        data: dict | None = None,
        unlock: tuple[ItemLock, ...] = (),
    ) -> Outcome:
        return cls(Decision.SUCCESS, message, job=job, data=data, unlock=unlock)

    @classmethod
    def fail(cls, message: str) -> Outcome:
        return cls(Decision.FAIL, message)

    @classmethod
    def later(cls, message: str, delay: float = 30.0) -> Outcome:
        return cls(Decision.LATER, message, delay=delay)

    @classmethod
    def move(cls, target: str, message: str = "", data: dict | None = None) -> Outcome:
        return cls(Decision.MOVE, message, target=target, data=data)


class StepResult(StrEnum):
    COMMITTED = "committed"
    BUSY = "busy"  # another worker holds the lock
    STALE = "stale"  # the job is no longer in the expected status
    PAUSED = "paused"  # the ingest queue is paused: nothing new starts
    DEFERRED = "deferred"  # the handler asked to stay and be retried later
    ABANDONED = "abandoned"  # lock lost or changed under us: nothing committed
    LEFT = "merritt"  # not this site's to run (MQ_WORKERS): left, untouched, to Merritt's ingest


@dataclass(frozen=True)
class StepReport:
    result: StepResult
    outcome: Outcome | None = None
    job: JobRecord | None = None
    steps: int = 0  # handlers run


Handler = Callable[[JobRecord], Outcome]


def run_handler(handler: Handler, job: JobRecord) -> Outcome:
    """Call the handler; turn any exception into a failure a librarian can read."""
    try:
        return handler(job)
    except (LockLost, ChangedUnderYou, *CONNECTION_ERRORS):
        raise  # not the job's fault: the step is abandoned and runs again
    except QueueError as e:
        return Outcome.fail(str(e))
    except Exception as e:  # a bug or an unexpected service error must not lose the job
        log.exception("handler for job %s in %s raised", job.jid, job.status)
        return Outcome.fail(f"internal error in {job.status}: {type(e).__name__}: {e}")


@dataclass(frozen=True)
class ChainPolicy:
    """How far one call may carry a job through consecutive steps under one lock.

    ``may_enter(status)`` says whether this worker may run that state's step (e.g. it
    serves that state's queue); a chain stops at ``max_steps`` steps, and starts no new
    step once ``max_seconds`` have passed since the first began.

    ``changes_delay``: the store's listeners (the mirror) hear of the call's writes
    together, at its end or once the first has waited that many seconds; 0 tells them
    of each write at once.
    """

    max_steps: int = 1
    max_seconds: float = 0.0
    may_enter: Callable[[str], bool] = lambda _status: False
    changes_delay: float = 0.0
    # Whether this site's workers run the job at all (``sides.runs_job`` of the worker
    # mode), asked under the lock before its first step: the dispatcher's own filter read
    # the job earlier, and a stray RQ job must not touch a job left to Merritt's ingest.
    runs: Callable[[JobRecord], bool] = lambda _job: True
    # Whether this site's workers run the job's step of a status it moves on to
    # (``sides.runs_job`` with the status): a ``merritt-queue`` job's Storing is Merritt's.
    enters: Callable[[JobRecord, str], bool] = lambda _job, _status: True
    # Told of each step as it begins (the worker's record, for the Workers page).
    on_step: Callable[[JobRecord], None] = lambda _job: None


ONE_STEP = ChainPolicy()


def run_job_step(
    store: QueueStore, jid: str, status: str, handler: Handler, *, respect_pause: bool = True
) -> StepReport:
    """Do one step of job ``jid`` if it is still in ``status`` (see ``run_job_steps``)."""
    return run_job_steps(store, jid, status, {status: handler}, respect_pause=respect_pause)


def run_job_steps(
    store: QueueStore,
    jid: str,
    status: str,
    handlers: Mapping[str, Handler],
    *,
    policy: ChainPolicy = ONE_STEP,
    respect_pause: bool = True,
) -> StepReport:
    """Do the step of job ``jid`` if it is still in ``status``, then maybe the next ones.

    1. Skip when the queue is paused, or another worker holds the lock.
    2. Lock the job and re-read it; skip when its status moved on.
    3. Run the handler of its status.
    4. Commit the outcome together with the unlock, or just unlock; or, when the job
       moved to a state ``policy`` lets this call enter, commit keeping the lock, check
       that nobody changed the job meanwhile (a hold, a delete) and go to 3.

    A chain keeps every guarantee of single steps: each step commits in its own
    version-checked multi (which checks the lock instead of dropping it), and a worker
    that dies mid-chain leaves the job in the state it reached, unlocked once its
    session ends, for the dispatcher to enqueue like any other.
    """
    if respect_pause and pause_flag(store.client).paused():
        return StepReport(StepResult.PAUSED)
    with store.changes.deferred(max_delay=policy.changes_delay):
        return _run_steps(store, jid, status, handlers, policy)


def _run_steps(store, jid, status, handlers, policy) -> StepReport:
    try:
        job = store.job_locks.lock_job(jid)
    except InvalidData as e:  # damaged data: nothing to run until check_tree or an admin fixes it
        log.error("job %s step %s not run: %s", jid, status, e)
        return StepReport(StepResult.ABANDONED)
    if job is None:
        return StepReport(StepResult.BUSY)
    if job.status != status:
        store.job_locks.unlock_job(job)
        return StepReport(StepResult.STALE, job=job)
    if not policy.runs(job):
        store.job_locks.unlock_job(job)
        return StepReport(StepResult.LEFT, job=job)
    started, steps = time.monotonic(), 0
    while True:
        attempt, began_at = None, t.now()
        try:
            began = time.monotonic()
            policy.on_step(job)
            attempt = store.locks.begin_attempt(job)
            with running(attempt):
                outcome = run_handler(handlers[job.status], job)
            took = time.monotonic() - began
            steps += 1
            go_on = _may_go_on(store, job, outcome, handlers, policy, steps, started)
            told = summary(store, attempt, job, began_at, took, outcome)
            result, outcome, done = commit(store, job, outcome, keep_lock=go_on, steps=told)
            metrics.step_committed(job.status, outcome.action, done.status, took)
            # Changed between steps (held, deleted, lock gone): the next step is not ours.
            changed = go_on and not store.job_locks.still_ours(done)
        except (LockLost, ChangedUnderYou, NotFound, *CONNECTION_ERRORS) as e:
            # ZooKeeper away: the commit may or may not have happened; either way the
            # job's status says where it is, and the lock must not outlive the step.
            log.warning(
                "job %s: its %s step was abandoned: %s. %s; the step runs again on whichever "
                "worker takes the job next, if it is still to do",
                jid,
                job.status,
                describe(e).rstrip("."),
                "Its commit, if under way, may or may not have reached ZooKeeper, whose status "
                "of the job says which"
                if isinstance(e, CONNECTION_ERRORS)
                else "Nothing of it was committed",
            )
            metrics.step_abandoned(job.status)
            if attempt is not None:
                _keep_abandoned(store, job, attempt, began_at, began, e)
            # only if still this session's (or once ZooKeeper answers)
            store.job_locks.unlock_job(job)
            return StepReport(StepResult.ABANDONED, job=job, steps=steps)
        if not go_on:
            _follow_batch(store, done)
            return StepReport(result, outcome, done, steps)
        if changed:
            log.info("job %s changed after %s; not going on to %s", jid, job.status, done.status)
            return StepReport(result, outcome, done, steps)
        job = done


def summary(
    store: QueueStore,
    attempt: Attempt,
    job: JobRecord,
    at: str,
    took: float,
    outcome: Outcome | None,
    why: str = "",
) -> dict:
    """What ``attempt`` did, for the job's ``steps`` node (``steprecord``); ``outcome``
    None: it was abandoned, ``why``."""
    if outcome is None:
        action, to, message = "abandoned", job.status, why
    else:
        action, message = outcome.action.value, outcome.message
        to = {
            Decision.SUCCESS: JOB.success_of(job.status),
            Decision.FAIL: JobStatus.FAILED,
            Decision.LATER: job.status,
        }.get(outcome.action, outcome.target or "")
    return sr.summary(
        step=job.status,
        version=job.status_version,
        attempt=attempt.token,
        by=store.changes.actor,
        at=at,
        took=took,
        outcome=action,
        to=str(to),
        message=message,
        entries=attempt.log.entries(),
        more=attempt.log.more,
    )


def _keep_abandoned(store, job, attempt, at, began, error) -> None:
    """Keep what an abandoned attempt did, when its fence still allows (``stepwrites``);
    nothing is lost to the job when it cannot: the step runs again and is recorded then."""
    told = summary(store, attempt, job, at, time.monotonic() - began, None, describe(error))
    try:
        store.steps.save_unfinished(job, attempt, told)
    except (QueueError, *CONNECTION_ERRORS) as e:
        log.info(
            "job %s: what its abandoned %s attempt did was not kept: %s",
            job.jid,
            job.status,
            describe(e),
        )


def _follow_batch(store: QueueStore, job: JobRecord) -> None:
    """A resumed job completed in a Failed batch may leave the batch's report out of date: the
    batch is then reported again (``store.followups.follow_jobs``). The job's commit stands either
    way; a batch left Failed here is still reported again by a person's "Report again".

    Only a resumed job asks (``retry_count``): a batch is reported once none of its jobs runs,
    so a job still running in a Failed batch was brought back to work, and the jobs of a
    batch's first run cost no read more."""
    if job.status != JobStatus.COMPLETED or not job.bid or not job.retry_count:
        return
    try:
        store.followups.follow_jobs(job.bid, job.jid)
    except (QueueError, *CONNECTION_ERRORS) as e:
        log.warning("batch %s not reported again after job %s: %r", job.bid, job.jid, e)


def _may_go_on(store, job, outcome, handlers, policy, steps, started) -> bool:
    """Whether to commit ``outcome`` keeping the lock, to run the next step at once."""
    if outcome.action == Decision.SUCCESS:
        target = JOB.success_of(job.status)
    elif outcome.action == Decision.MOVE:
        target = outcome.target
    else:
        return False
    return (
        target in handlers
        and steps < policy.max_steps
        and time.monotonic() - started < policy.max_seconds
        and policy.may_enter(target)
        and policy.enters(_as_committed(job, outcome), target)
        and not pause_flag(store.client).paused()
    )


def _as_committed(job: JobRecord, outcome: Outcome) -> JobRecord:
    """The job as the outcome's commit leaves it, for ``enters``: the size Estimating found
    decides the lane of the job's next step (``lanes``)."""
    job = outcome.job or job
    space = (outcome.data or {}).get("space_needed")
    return job if space is None else evolve(job, space_needed=space)


def commit(
    store: QueueStore, job: JobRecord, outcome: Outcome, *, keep_lock=False, steps=None
) -> tuple:
    """Write ``outcome``; ``steps``: the attempt's summary, kept in the same multi."""
    try:
        result = _commit(store, job, outcome, keep_lock, steps)
    except BaseException:
        _release(store, outcome.unlock)
        raise
    if outcome.action != Decision.SUCCESS:  # only a success's multi lets go of them
        _release(store, outcome.unlock)
    return result


def _release(store: QueueStore, locks: tuple[ItemLock, ...]) -> None:
    for lock in locks:
        try:
            store.locks.release_lock(lock)
        except CONNECTION_ERRORS as e:
            # A storage lock left behind names this job: its next run takes it back.
            log.warning("could not release %s: %s", lock.path, describe(e))


def _commit(store: QueueStore, job: JobRecord, outcome: Outcome, keep_lock: bool, steps) -> tuple:
    if outcome.action == Decision.LATER:
        # The librarian sees why the job waits; the lock goes in the same write.
        waiting = store.moves.note_job(
            outcome.job or job, outcome.message, release_lock=True, steps=steps
        )
        return StepResult.DEFERRED, outcome, waiting
    # Handlers may have written data nodes, never the status: the version still holds.
    job = outcome.job or job
    if outcome.action == Decision.SUCCESS:
        done = store.moves.succeed_job(
            job,
            outcome.message,
            keep_lock=keep_lock,
            data=outcome.data,
            unlock=outcome.unlock,
            steps=steps,
        )
    elif outcome.action == Decision.FAIL:
        done = store.moves.fail_job(job, outcome.message, release_lock=True, steps=steps)
    elif outcome.action == Decision.MOVE:
        assert outcome.target is not None  # Outcome.move always names one
        done = store.moves.transition_job(
            job,
            outcome.target,
            outcome.message,
            release_lock=not keep_lock,
            keep_lock=keep_lock,
            data=outcome.data,
            steps=steps,
        )
    else:
        raise ValueError(f"unknown outcome {outcome.action!r}")
    return StepResult.COMMITTED, outcome, done
