"""Quarantined jobs (``ui.quarantine``) in a resume's plan: a resume of many jobs leaves them
out, since resuming a job that failed the same way again and again only feeds a retry
storm; a resume of the one job, named by a person with a reason, takes it, and its
confirmation says what the job's record shows."""

from __future__ import annotations

from dataclasses import replace

from steering.actions.catalog import Action
from steering.actions.planning import PlanItem
from ui import quarantine

RESUMES = ("job.resume",)


def judge(action: Action, items: list[PlanItem], *, named: bool = True) -> list[PlanItem]:
    """``items`` with the quarantined jobs left out of a resume of several (or of all a
    list's filter matches), or warned of in a resume of the one job a person named."""
    if action.name not in RESUMES:
        return items
    found = quarantine.of([p.target.id for p in items if p.applies])
    if not found:
        return items
    alone = named and len(items) == 1
    out = []
    for p in items:
        q = found.get(p.target.id)
        if q is None:
            out.append(p)
        elif alone:
            out.append(replace(p, why=f"warning: {q.words}; your reason is recorded with it"))
        else:
            why = f"{q.words}; resume it on its own (its page), with a reason"
            out.append(replace(p, applies=False, why=why))
    return out
