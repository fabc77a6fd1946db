"""What happened to an object and who decided it, as preservation events (PREMIS's model),
read from what the queue already keeps: each job's timeline (``JobEvent``), what each of its
steps did (``JobSteps``), the admin actions behind its moves (``AdminActionItem``) and the
inventory's versions. ``inventory.premisxml`` writes it out; nothing here knows XML.

Which jobs: the job that made each version, and (for the whole object) the other jobs of the
object's collection that named its ARK, such as a failed one that was deleted. A job purged
from the mirror keeps its timeline and steps rows, so its events stay; only the jobs of an
ARK that never made a version and whose job row was purged are not found.

Event identifiers are built from the job, its status version or its step attempt, so the
same history exports the same identifiers every time: an auditor can compare two exports.

A depositor reads the same as the job page shows them (the timeline, with admin names and
reasons); of the step record only the entries ``steprecord.public`` gives them are used, and
only their public fields, so nothing differs by reader.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from batches.models import Batch
from inventory.models import InventoryObject, InventoryVersion
from inventory.premisterms import (
    ARK,
    MERRITT_INGEST,
    VERSION,
    Agent,
    Event,
    Link,
    software,
    version_id,
)
from inventory.stepevents import job_step_events, when
from jobs.models import Job, JobEvent, JobSteps
from merritt_queue.core import history
from merritt_queue.core.states import JobStatus as J
from steering.models import AdminActionItem

# The admin actions on a job whose move is an event of their own.
ACTION_EVENTS = {
    "job.hold": "hold",
    "job.release": "release",
    "job.resume": "resume",
    "job.edit_resume": "metadata modification",
    "job.force_fail": "failure",
    "job.delete": "deletion",
}


@dataclass
class History:
    obj: InventoryObject
    versions: list[InventoryVersion]
    events: list[Event]
    agents: list[Agent]


def object_history(obj: InventoryObject, version: int | None = None) -> History:
    """The events of ``obj`` (or of its version ``version`` alone), oldest first."""
    rows = obj.versions.order_by("number")
    versions = list(rows.filter(number=version) if version is not None else rows)
    made = {v.job_id: v.number for v in versions if v.job_id}
    jids = list(made)
    if version is None:
        named = Job.objects.filter(ark=obj.ark, collection=obj.collection)
        jids += sorted(set(named.values_list("jid", flat=True)) - set(made))
    files = _file_names(versions)
    events: list[Event] = []
    for jid in jids:
        events += _job_events(obj.ark, jid, made.get(jid), files)
    for v in versions:
        events.append(_recorded(obj.ark, v))
    events.sort(key=lambda e: (e.at, e.ident))
    agents: dict[tuple[str, str], Agent] = {}
    for e in events:
        for agent, _ in e.agents:
            agents.setdefault(agent.key, agent)
    return History(obj, versions, events, list(agents.values()))


def _file_names(versions: Iterable[InventoryVersion]) -> dict[int, set[str]]:
    return {v.number: set(v.files.values_list("name", flat=True)) for v in versions}


def _recorded(ark: str, v: InventoryVersion) -> Event:
    """The inventory's row is the record of the version: an event even when its job is gone."""
    changes = (
        f"{v.mode}: {v.added_count} added, {v.replaced_count} replaced, "
        f"{len(v.deleted or [])} deleted, {v.carried_count} carried; "
        if v.mode
        else ""
    )
    return Event(
        ident=f"{version_id(ark, v.number)}/recorded",
        kind="inventory recording",
        at=v.stored,
        detail=f"version {v.number} recorded in the inventory by job {v.job_id}: {changes}"
        f"{v.file_count} files, {v.total_size} bytes",
        outcome="success",
        agents=[(software(), "executing program")],
        objects=[Link(ARK, ark), Link(VERSION, version_id(ark, v.number), "outcome")],
    )


def _job_events(ark: str, jid: str, number: int | None, files: dict[int, set[str]]) -> list[Event]:
    timeline = list(JobEvent.objects.filter(jid=jid).order_by("status_version"))
    actions = _admin_actions(jid, [e.status_version for e in timeline])
    links = [Link(ARK, ark)]
    if number is not None:
        links.append(Link(VERSION, version_id(ark, number), "outcome"))
    depositor = _depositor(jid)
    events = [
        event
        for row in timeline
        if (event := _move(jid, row, actions.get(row.status_version), links, depositor)) is not None
    ]
    steps = JobSteps.objects.filter(jid=jid).only("record", "damaged").first()
    if steps is not None and not steps.damaged:
        names = files.get(number, set()) if number is not None else set()
        events += job_step_events(ark, jid, number, names, steps.record, links)
    return events


def _depositor(jid: str) -> Agent | None:
    """Who submitted the job: its job row says, or its batch's when the job row was purged."""
    name = Job.objects.filter(jid=jid).values_list("submitter", flat=True).first()
    if not name:
        bid = JobEvent.objects.filter(jid=jid).exclude(bid="").values_list("bid", flat=True)
        name = Batch.objects.filter(bid__in=bid[:1]).values_list("submitter", flat=True).first()
    return _submitter(name) if name else None


def _submitter(name: str) -> Agent:
    return Agent("depositor", name, "person", note="submitted the deposit")


def _admin_actions(jid: str, versions: list[int]) -> dict[int, AdminActionItem]:
    items = AdminActionItem.objects.filter(item_id=jid, after_version__in=versions)
    return {
        i.after_version: i
        for i in items.select_related("admin_action").order_by("id")
        if i.after_version is not None and i.result == "done"
    }


def _actor(actor: str) -> tuple[Agent, str] | None:
    """The person or program a timeline row names, and its role."""
    if actor.startswith(history.ADMIN_PREFIX):
        return Agent("user", actor[len(history.ADMIN_PREFIX) :], "person"), "implementer"
    if actor.startswith(history.SUBMISSION_PREFIX):
        return _submitter(actor[len(history.SUBMISSION_PREFIX) :]), "submitter"
    if actor == history.OTHER_WRITER:
        return MERRITT_INGEST, "executing program"
    return None


def _kind_of_move(row: JobEvent, item: AdminActionItem | None) -> str:
    if item is not None and item.admin_action.action in ACTION_EVENTS:
        return ACTION_EVENTS[item.admin_action.action]
    to, was = row.to_status, row.from_status
    if to == J.PENDING and not was and row.status_version <= 0:
        return "ingestion start"
    if to == J.PENDING and not was and row.actor.startswith(history.SUBMISSION_PREFIX):
        return "ingestion start"
    if to == J.HELD:
        return "hold"
    if was == J.HELD and to == J.PENDING:
        return "release"
    if to == J.FAILED:
        return "failure"
    if to == J.DELETED:
        return "deletion"
    if to == J.COMPLETED:
        return "ingestion"
    if was == J.FAILED:
        return "resume"
    return ""


def _move(
    jid: str,
    row: JobEvent,
    item: AdminActionItem | None,
    links: list[Link],
    depositor: Agent | None,
) -> Event | None:
    kind = _kind_of_move(row, item)
    if not kind:
        return None  # a step's routine move: the step's own events tell it
    agents = [(software(), "executing program")]
    if (told := _actor(row.actor)) is not None:
        agents = [told] if told[0].kind == "software" else [*agents, told]
    if kind in ("ingestion start", "ingestion") and depositor is not None:
        if not any(role == "submitter" for _, role in agents):
            agents.append((depositor, "submitter"))
    change = f"{row.from_status or 'new'} -> {row.to_status}"
    detail = f"job {jid} (batch {row.bid or 'unknown'}) {change}, status version "
    detail += f"{row.status_version}"
    if item is not None:
        action = item.admin_action
        detail += f"; admin action {action.action} by {action.username}: {action.reason}"
    outcome, note = "", row.message
    if kind == "failure":
        outcome = "failure"
    elif kind == "ingestion":
        outcome = "success"
    return Event(
        ident=f"{jid}/status/{row.status_version}",
        kind=kind,
        at=when(row.at),
        detail=detail,
        outcome=outcome,
        outcome_note=note,
        agents=agents,
        objects=list(links),
    )
