"""What an admin action's confirmation page lists: whether the action applies to each item,
and why not; for a resume, the steps a job may restart at."""

from __future__ import annotations

from dataclasses import dataclass

from batches.models import Profile
from merritt_queue.core.errors import QueueError
from merritt_queue.core.states import JOB_STEPS, JobStatus, resume_target
from merritt_queue.core.store import QueueStore
from merritt_queue.project.runtime import get_store
from steering.catalog import Action, Target
from steering.permissions import collections_of

J = JobStatus


@dataclass(frozen=True)
class PlanItem:
    target: Target
    applies: bool
    why: str = ""


def plan(user, action: Action, targets: list[Target]) -> list[PlanItem]:
    """Whether the action applies to each item, and why not."""
    scope = collections_of(user)
    return [judge(action, t, scope) for t in targets]


def judge(action: Action, t: Target, scope: set[str] | None) -> PlanItem:
    why = action.check(t, scope)
    if why is not None:
        return PlanItem(t, False, why)
    return PlanItem(t, True, _extra_note(action, t))


def _extra_note(action: Action, t: Target) -> str:
    if (
        action.name == "job.release"
        and t.collection
        and get_store(init=False).is_collection_held(t.collection)
    ):
        return f"warning: collection {t.collection} is still on hold, so the job will be held again"
    return action.warning


def profile_collections() -> dict[str, str]:
    """Each profile's collection: a mirror row of Merritt's names only its profile."""
    return dict(Profile.objects.values_list("name", "collection"))


def resume_offer(job) -> list[str]:
    """The steps a resume of ``job`` (anything with jid, status, last_successful_status)
    may restart at: the run's own check (``QueueStore.resume_step``) asked of each step, so
    a confirmation page built from it offers exactly what the run will accept."""
    offered = []
    for step in (J.PENDING, *JOB_STEPS):
        try:
            QueueStore.resume_step(job, step)
        except QueueError:
            continue
        offered.append(step)
    return offered


def steps_again(last_successful: str | None, step: str | None = None) -> list[str]:
    """The steps a resumed job runs again, from where it restarts to the end."""
    start = step or resume_target(last_successful)
    order = [J.PENDING, *JOB_STEPS]
    return order[order.index(start) :] if start in order else []
