"""The words of an object's preservation history (``inventory.provenance``): its events,
the agents that took them and the objects they are about, with the Library of Congress
vocabulary terms where one fits, and how objects are identified in the export."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata

from merritt_queue.core import history

LOC = "http://id.loc.gov/vocabulary/preservation/"
SOFTWARE = "merritt-queue"

# The Library of Congress event types this history has a fitting term for; the others
# (a hold, a release, a resume: the queue's own) are named in words, with no URI.
EVENT_TYPES = {
    "ingestion start": "ins",
    "ingestion": "ing",
    "message digest calculation": "mes",
    "fixity check": "fix",
    "accession": "acc",
    "metadata modification": "mem",
    "deletion": "del",
}
ROLES = {"executing program": "exe", "implementer": "imp"}


@functools.cache  # a metadata lookup reads the installed files: once per process
def software_version() -> str:
    try:
        return metadata.version(SOFTWARE)
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


@dataclass(frozen=True)
class Agent:
    id_type: str
    name: str
    kind: str  # software | person
    version: str = ""
    note: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.id_type, self.name)


def software() -> Agent:
    version = software_version()
    return Agent("software", f"{SOFTWARE} {version}", "software", version)


MERRITT_INGEST = Agent("software", history.OTHER_WRITER, "software")


@dataclass(frozen=True)
class Link:
    """An object an event is about: (identifier type, value, role)."""

    id_type: str
    value: str
    role: str = ""


@dataclass
class Event:
    ident: str
    kind: str  # the event type's words (EVENT_TYPES)
    at: datetime
    detail: str
    outcome: str = ""  # success | failure | "" (a move that neither succeeds nor fails)
    outcome_note: str = ""
    agents: list[tuple[Agent, str]] = field(default_factory=list)
    objects: list[Link] = field(default_factory=list)

    @property
    def uri(self) -> str:
        code = EVENT_TYPES.get(self.kind)
        return f"{LOC}eventType/{code}" if code else ""


def role_uri(role: str) -> str:
    code = ROLES.get(role)
    return f"{LOC}eventRelatedAgentRole/{code}" if code else ""


# --- object identifiers -------------------------------------------------------------

ARK = "ARK"
VERSION = "ARK version"
FILE = "ARK version file"


def version_id(ark: str, number: int) -> str:
    return f"{ark}/v{number}"


def file_id(ark: str, number: int, name: str) -> str:
    return f"{ark}/v{number}/{name}"
