"""Who may take an admin action, and what its confirmation page lists: whether the action
applies to each item, and why not; for a resume, the steps a job may restart at."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from batches.models import Profile, mnemonic_problem
from merritt_queue.core.errors import QueueError
from merritt_queue.core.states import JOB_STEPS, JobStatus, resume_target
from merritt_queue.core.store import QueueStore
from merritt_queue.project.runtime import get_store
from steering.catalog import Action
from steering.models import ADMINISTRATOR, OPERATOR, group_names

J = JobStatus


# --- who may act --------------------------------------------------------------------

RANK = {OPERATOR: 1, ADMINISTRATOR: 2}


def role_of(user) -> int:
    if not user.is_authenticated:
        return 0
    if user.is_superuser:
        return RANK[ADMINISTRATOR]
    return max((RANK[n] for n in group_names(user) if n in RANK), default=0)


def may(user, action: Action) -> bool:
    return not settings.READ_ONLY and role_of(user) >= RANK[action.role]


def collections_of(user) -> set[str] | None:
    """The collections a person may act on; None means all."""
    scope = getattr(user, "scope", None) if user.is_authenticated else None
    return set(scope.collections) if scope and scope.collections else None


def refusal(user, action: Action) -> str | None:
    if settings.READ_ONLY:
        return "the queue is in read-only mode (READ_ONLY): no action can be taken"
    if not may(user, action):
        return f"{action.label} needs the {action.role} role"
    return None


# --- planning: what the confirmation page lists ---------------------------------------


@dataclass(frozen=True)
class Target:
    """An item as shown on the confirmation page."""

    id: str
    status: str = ""
    version: int | None = None
    collection: str = ""
    locked: bool = False


@dataclass(frozen=True)
class PlanItem:
    target: Target
    applies: bool
    why: str = ""


def plan(user, action: Action, targets: list[Target]) -> list[PlanItem]:
    """Whether the action applies to each item, and why not."""
    scope = collections_of(user)
    return [judge(action, t, scope) for t in targets]


def judge(action: Action, t: Target, scope: set[str] | None, *, notes: bool = True) -> PlanItem:
    if action.scope == "collection" and (why := mnemonic_problem(t.id)):
        return PlanItem(t, False, why)
    if action.applies_to and t.status in action.refusals:
        return PlanItem(t, False, f"it is {t.status}: {action.refusals[t.status]}")
    if action.applies_to and t.status not in action.applies_to:
        allowed = ", ".join(sorted(action.applies_to))
        return PlanItem(t, False, f"it is {t.status}; {action.label.lower()} applies to {allowed}")
    if t.locked and not action.locked_ok:
        return PlanItem(t, False, "a worker is running a step on it (locked)")
    collection = t.id if action.scope == "collection" else t.collection
    if scope is not None and collection not in scope:
        return PlanItem(
            t, False, f"collection {collection or '(none)'} is outside your collections"
        )
    return PlanItem(t, True, _extra_note(action, t) if notes else "")


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
