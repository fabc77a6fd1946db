"""Preservation events from what a job's steps did (``jobs.models.JobSteps``): the digests
computed of the deposited files and their check against the depositor's digests, the ARK
assigned and the version stored. Only the entries and fields ``steprecord.public`` gives a
depositor are read, so every reader of the object gets the same events.

Entries carry no time of their own: an event has its attempt's start, the time the record
keeps."""

from __future__ import annotations

from datetime import UTC, datetime

from inventory.premisterms import ARK, FILE, Agent, Event, Link, file_id, software
from merritt_queue.core import steprecord as sr
from merritt_queue.core.tree import parse_timestamp


def job_step_events(
    ark: str, jid: str, number: int | None, names: set[str], record: dict, links: list[Link]
) -> list[Event]:
    """The events of the job's step ``record`` (``StepRecord.as_json``), oldest first."""
    events: list[Event] = []
    for attempt in sr.from_json(record).attempts:
        shown = sr.public(sr.StepRecord((attempt,), exists=True))["attempts"][0]
        token = str(attempt.get("attempt") or "")
        events += _step_events(ark, jid, number, names, shown, token, links)
    return events


def when(value: datetime | str | None) -> datetime:
    """A mirror's time, or a ZooKeeper timestamp, as an aware datetime."""
    if isinstance(value, str):
        value = parse_timestamp(value)
    if value is None:
        return datetime.fromtimestamp(0, UTC)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _step_events(
    ark: str,
    jid: str,
    number: int | None,
    names: set[str],
    attempt: dict,
    token: str,
    links: list[Link],
) -> list[Event]:
    """The events of one attempt's entries (``attempt`` as ``steprecord.public`` gives it)."""
    at = when(attempt.get("at"))
    step = attempt.get("step") or ""
    base = f"{jid}/step/{token or at.isoformat()}"
    agents = [(software(), "executing program")]
    events = []
    for n, entry in enumerate(attempt.get("entries") or []):
        kind = entry.get("kind")
        ident = f"{base}/{n}"
        made = []
        if kind == "digest":
            made += _digest_events(ark, number, names, entry, ident, at, agents)
        elif kind == "ark":
            made.append(
                Event(
                    ident=ident,
                    kind="identifier assignment",
                    at=at,
                    detail=f"ARK {entry.get('ark')} {entry.get('how') or 'assigned'} "
                    f"(job {jid}, {step})",
                    outcome="success",
                    agents=agents,
                    objects=[Link(ARK, str(entry.get("ark") or ark), "outcome")],
                )
            )
        elif kind == "storage":
            unchanged = bool(entry.get("unchanged"))
            what = (
                f"nothing new to store: the object stays at version {entry.get('version')}"
                if unchanged
                else f"version {entry.get('version')} stored, {entry.get('files')} files"
            )
            made.append(
                Event(
                    ident=ident,
                    kind="accession",
                    at=at,
                    detail=f"{what} (job {jid})",
                    outcome="success" if entry.get("ok") else "failure",
                    agents=agents,
                    objects=list(links),
                )
            )
        events += made
    return events


def _digest_events(
    ark: str,
    number: int | None,
    names: set[str],
    entry: dict,
    ident: str,
    at: datetime,
    agents: list[tuple[Agent, str]],
) -> list[Event]:
    """A digest computed of a deposited file, and its check against the depositor's digest."""
    name = str(entry.get("file") or "")
    target = _file_link(ark, number, names, name)
    computed = _dict(entry.get("computed"))
    expected = _dict(entry.get("expected"))
    events = []
    if computed:
        events.append(
            Event(
                ident=f"{ident}/digest",
                kind="message digest calculation",
                at=at,
                detail=f"digest of the deposited file {name}",
                outcome="success",
                outcome_note=_digests(computed),
                agents=agents,
                objects=[target],
            )
        )
    if expected and entry.get("ok") is not None:
        ok = bool(entry.get("ok"))
        events.append(
            Event(
                ident=f"{ident}/fixity",
                kind="fixity check",
                at=at,
                detail=f"the deposited file {name} checked against the depositor's digest",
                outcome="success" if ok else "failure",
                outcome_note=f"expected {_digests(expected)}; computed {_digests(computed)}",
                agents=agents,
                objects=[target],
            )
        )
    return events


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _digests(values: dict) -> str:
    return ", ".join(f"{alg} {value}" for alg, value in values.items())


def _file_link(ark: str, number: int | None, names: set[str], name: str) -> Link:
    """The version's file the deposited ``name`` became, when the inventory holds it."""
    if number is not None:
        for stored in (name, f"producer/{name}"):
            if stored in names:
                return Link(FILE, file_id(ark, number, stored), "source")
    return Link("deposited file name", name, "source")
