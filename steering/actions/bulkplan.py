"""One edit over many failed jobs (one cause, many jobs: a moved folder, a digest algorithm
named wrongly): what it changes on each job, or why it does not apply to it.

Each job's change is the one an operator would have typed into its own edit form
(``steering.actions.editing``), checked at the same door (``steering.actions.editdoor``); the
changes are confirmed together and executed as one admin action over the jobs, each job by the same
version-checked multi as a single edit (``steering.actions.fixes.edit_resume``).
"""

from __future__ import annotations

from dataclasses import dataclass

from merritt_queue.core import jobparams
from merritt_queue.core.records import JobRecord
from steering.actions.editdoor import door_problems, same_algorithm

Changes = dict[str, tuple[str, str]]


@dataclass(frozen=True)
class BulkEdit:
    """What the operator asked: a payload URL prefix replaced, a digest algorithm set."""

    url_from: str = ""
    url_to: str = ""
    algorithm: str = ""

    def as_params(self) -> dict:
        """As the audit record keeps it beside each job's own change."""
        asked: dict[str, object] = {}
        if self.url_from:
            asked["payload_url_prefix"] = [self.url_from, self.url_to]
        if self.algorithm:
            asked["digest_type"] = self.algorithm
        return asked

    @classmethod
    def from_params(cls, asked: dict) -> BulkEdit:
        url_from, url_to = asked.get("payload_url_prefix") or ("", "")
        return cls(url_from, url_to, asked.get("digest_type") or "")


@dataclass(frozen=True)
class Planned:
    """One job of the selection: its change and where it restarts, or why it is left out."""

    job: JobRecord
    changes: Changes
    step: str = ""
    why: str = ""

    @property
    def applies(self) -> bool:
        return not self.why

    @property
    def job_url(self) -> str:
        return (self.job.configuration or {}).get("payload_url") or ""


def plan_job(job: JobRecord, edit: BulkEdit, refusal: str | None = None) -> Planned:
    """``edit`` on ``job``; every part asked must apply to the job, or it is left out, so
    that an edit meant for one group never touches a job outside it. ``refusal``: why the
    action may not be taken on the job at all (its status, a lock, a collection)."""
    if refusal:
        return Planned(job, {}, why=refusal)
    before = jobparams.current(job.configuration, job.identifiers, job.metadata)
    after = dict(before)
    if edit.url_from:
        if not before["payload_url"].startswith(edit.url_from):
            return Planned(job, {}, why=f"its payload URL does not start with {edit.url_from}")
        after["payload_url"] = edit.url_to + before["payload_url"][len(edit.url_from) :]
    if edit.algorithm:
        if not before["digest_value"]:
            return Planned(job, {}, why="it has no digest value for an algorithm to describe")
        if not same_algorithm(before["digest_type"], edit.algorithm):
            after["digest_type"] = edit.algorithm
    if problems := door_problems(job, after):
        words = (
            f"{jobparams.LABELS[name]}: {message}"
            for name, messages in problems.items()
            for message in messages
        )
        return Planned(job, {}, why="; ".join(words))
    changes = jobparams.changes_of(before, after)
    if not changes:
        return Planned(job, {}, why="the edit changes nothing on it")
    step = jobparams.default_step(job.last_successful_status, list(changes))
    return Planned(job, changes, step)


def each_change(planned: list[Planned]) -> dict[str, dict[str, list[str]]]:
    """The changes confirmed, job by job, as the signed payload and the audit keep them."""
    return {
        p.job.jid: {name: list(pair) for name, pair in p.changes.items()}
        for p in planned
        if p.applies
    }
