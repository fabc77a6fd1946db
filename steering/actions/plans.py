"""The plan a confirmation page shows, built in one call (``build``): each item judged
(``planning.plan``); for a resume, what each job runs again, the steps it may restart at
(the run's own check asked, ``resume_offer``) and the jobs that failed the same way
(``samecause``); and what goes with the items that apply (a batch delete's jobs, a
collection release's other holds and held items). The view asks for it once and shows it,
with no step of its own for any one action."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.models import Job
from merritt_queue.core.states import JobStatus, resume_note, resume_target
from steering.actions import poison, wholefilter
from steering.actions.kinds import Action, Target
from steering.actions.planning import (
    HELD_LISTS,
    HeldList,
    PlanItem,
    also_deleted,
    held_lists,
    other_holds,
    plan,
)
from steering.actions.resumesteps import common_steps, resume_offer, steps_again
from steering.actions.samecause import SameCause, same_causes, same_causes_of
from steering.actions.selection import Selection
from steering.actions.wholefilter import Summary
from steering.permissions import collections_of

J = JobStatus
SHOWN = 200  # items listed on the confirmation page


@dataclass(frozen=True)
class Plan:
    items: list[PlanItem]  # every item asked for, and whether the action applies to it
    again: dict[str, list[str]]  # a resume: per job, the steps it runs again
    options: list[dict]  # a resume: the steps it may restart at, to choose from
    along: dict[str, list[tuple[str, str]]]  # a batch delete: per batch, its jobs deleted too
    other_holds: dict[str, list[str]]  # a collection release: holds another tool placed
    held: dict[str, HeldList]  # a collection release: its held batches and jobs
    applying: list[PlanItem]  # the items it applies to: the confirmation signs them
    steps: list[str]  # a resume: the steps offered, as the confirmation signs them
    same_causes: list[SameCause]  # a resume: the jobs that failed the same way, in groups
    # The first ``SHOWN`` items as the page lists them: each with what it runs again (a
    # resume) and what goes with it (a batch delete's jobs).
    rows: list[dict]
    along_count: int  # a batch delete: the jobs deleted with the batches
    strong: bool  # the page warns before the reason is typed
    caught: bool  # a collection release: its held items are those its hold caught
    # Too many to list (``wholefilter``): the counts; ``items`` and ``rows`` are a sample and
    # ``applying`` is empty, the run reading the selection again.
    summary: Summary | None = None


def build(user, action: Action, selection: Selection, *, back: str = "") -> Plan:
    """The plan of ``action`` on the ``selection`` (its items in the mirror, and the ids
    missing from it) for ``user``; ``back``: the page the person came from, where the
    offers the plan makes (a same-cause edit) lead back to."""
    if selection.rows is not None:
        return _summarized(user, action, selection, selection.rows, back)
    return _listed(user, action, selection, back)


def _summarized(user, action: Action, selection: Selection, rows, back: str) -> Plan:
    scope = collections_of(user)
    summary = wholefilter.summarize(action, rows, scope)
    items = poison.judge(action, plan(user, action, selection.targets), named=False)
    items, again, _ = _resume_plan(action, items)
    resumes = action.name == "job.resume"
    return Plan(
        items,
        again,
        summary.steps,
        along={},
        other_holds={},
        held={},
        applying=[],
        steps=[o["step"] for o in summary.steps if o["step"]],
        same_causes=(
            same_causes_of(
                wholefilter.in_scope(rows.filter(removed_at__isnull=True), scope),
                query=selection.query,
                back=back,
            )
            if resumes
            else []
        ),
        rows=[{"plan": p, "again": again.get(p.target.id), "along": []} for p in items],
        along_count=0,
        strong=bool(action.warning),
        caught=False,
        summary=summary,
    )


def _listed(user, action: Action, selection: Selection, back: str) -> Plan:
    items = plan(user, action, selection.targets)
    items += [
        PlanItem(Target(i), False, "not in the mirror (unknown id)") for i in selection.missing
    ]
    items = poison.judge(action, items, named=not selection.everything)
    items, again, options = _resume_plan(action, items)
    applying = [p for p in items if p.applies]
    ids = [p.target.id for p in applying]
    along = also_deleted(ids) if action.name == "batch.delete" else {}
    query = selection.query if selection.everything else ""
    return Plan(
        items,
        again,
        options,
        along=along,
        other_holds=other_holds(ids) if action.name == "collection.release" else {},
        held=(
            held_lists(ids, by_hold_only=HELD_LISTS[action.name])
            if action.name in HELD_LISTS
            else {}
        ),
        applying=applying,
        steps=[o["step"] for o in options if o["step"]],
        same_causes=(
            same_causes(ids, query=query, back=back) if action.name == "job.resume" else []
        ),
        rows=[
            {"plan": p, "again": again.get(p.target.id), "along": along.get(p.target.id, [])}
            for p in items[:SHOWN]
        ],
        along_count=sum(len(jobs) for jobs in along.values()),
        strong=action.name == "job.force_fail" or bool(action.warning),
        caught=HELD_LISTS.get(action.name, False),
    )


@dataclass(frozen=True)
class _Failed:
    """A Failed job as the mirror shows it, in the shape ``store.edits.resume_step`` reads."""

    jid: str
    status: str
    last_successful_status: str | None


def _resume_plan(action: Action, items: list[PlanItem]) -> tuple[list[PlanItem], dict, list]:
    """For a resume: each item judged by the run's own check, what each job runs again, and
    (for one job) the steps it may restart at; other actions pass through unchanged."""
    if action.name != "job.resume":
        return items, {}, []
    ids = [p.target.id for p in items if p.applies]
    rows = Job.objects.filter(jid__in=ids).values_list("jid", "status", "last_successful_status")
    jobs = {jid: _Failed(jid, status, last or None) for jid, status, last in rows}
    judged, again, offers = [], {}, {}
    for p in items:
        job = jobs.get(p.target.id)
        if not p.applies or job is None:
            judged.append(p)
            continue
        offers[job.jid] = resume_offer(job)
        if not offers[job.jid]:
            judged.append(PlanItem(p.target, False, "the queue would refuse to resume it"))
            continue
        note = resume_note(job.last_successful_status)
        judged.append(PlanItem(p.target, True, note or p.why))
        again[job.jid] = steps_again(job.last_successful_status)
    applying = [p.target.id for p in judged if p.applies]
    if len(applying) == 1:
        job = jobs[applying[0]]
        default = resume_target(job.last_successful_status)
        options = [
            {
                "step": s,
                "again": steps_again(job.last_successful_status, s),
                "default": s == default,
                "where_failed": s == default and not resume_note(job.last_successful_status),
            }
            for s in offers[job.jid]
        ]
        return judged, again, options
    return judged, again, common_steps([offers[jid] for jid in applying])
