"""The steps a resume restarts at: what the run's own check accepts for a job
(``resume_offer``), what a resumed job runs again (``steps_again``), and the steps every
job of a selection may restart at (``common_steps``). The confirmation pages offer exactly
these."""

from __future__ import annotations

from merritt_queue.core.errors import QueueError
from merritt_queue.core.states import JOB_STEPS, JobStatus, resume_target
from merritt_queue.core.store.jobedits import JobEdits

J = JobStatus


def common_steps(offers: list[list[str]]) -> list[dict]:
    """For several jobs: each restarts where it failed (the first choice), or all at a step
    every one of them may restart at."""
    if not offers:
        return []
    common = [s for s in offers[0] if all(s in o for o in offers[1:])]
    if not common:
        return []
    each = {"step": "", "again": [], "default": True, "where_failed": True, "each": True}
    return [each] + [
        {"step": s, "again": steps_again(None, s), "default": False, "where_failed": False}
        for s in common
    ]


def resume_offer(job) -> list[str]:
    """The steps a resume of ``job`` (anything with jid, status, last_successful_status)
    may restart at: the run's own check (``store.edits.resume_step``) asked of each step, so
    a confirmation page built from it offers exactly what the run will accept."""
    offered = []
    for step in (J.PENDING, *JOB_STEPS):
        try:
            JobEdits.resume_step(job, step)
        except QueueError:
            continue
        offered.append(step)
    return offered


def steps_again(last_successful: str | None, step: str | None = None) -> list[str]:
    """The steps a resumed job runs again, from where it restarts to the end."""
    start = step or resume_target(last_successful)
    order = [J.PENDING, *JOB_STEPS]
    return order[order.index(start) :] if start in order else []
