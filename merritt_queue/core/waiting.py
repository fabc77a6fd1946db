"""Why a job or batch is not moving: one pure decision from facts, the same for every page,
the status API and /metrics.

The facts are gathered elsewhere (the project reads them from the mirror); here they are
plain values, so every reason is decided, worded and tested without ZooKeeper or Django.
A step that decides to wait (``Outcome.later``) notes a message on the job that starts with
or contains one of the markers below: the handlers build their messages from these markers,
so the reason read back from the job is the one its step decided.

The rules are tried in ``RULE_ORDER``: the first that holds is the reason. An item that is
finished, failed or running is not waiting (None), nor is a batch whose jobs are under way
(its jobs each say why they wait).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from . import approval, review
from .errors import InvalidData
from .states import JOB_STEPS, BatchStatus, JobStatus
from .stepowners import MERRITT_QUEUE
from .tree import lock_name

# --- the reasons ---------------------------------------------------------------------------

HELD = "held"
COLLECTION_HELD = "collection_held"
MAINTENANCE_WINDOW = "maintenance_window"
MERRITT_STORAGE = "merritt_storage"
MERRITT_INVENTORY = "merritt_inventory"
QUEUE_PAUSED = "queue_paused"
MERRITT_INGEST = "merritt_ingest"
DEPENDENCY_DOWN = "dependency_down"
DISK_SPACE = "disk_space"
HOST_SLOTS = "host_slots"
LOCALID_LOCK = "localid_lock"
STORAGE_LOCK = "storage_lock"
INVENTORY_LOCK = "inventory_lock"
RETRYING = "retrying"
WORKER = "worker"

# Each code and its label (the filter's choices, the metric's documentation).
REASONS: dict[str, str] = {
    HELD: "held",
    COLLECTION_HELD: "collection held",
    MAINTENANCE_WINDOW: "maintenance window",
    MERRITT_STORAGE: "Merritt storage has it",
    MERRITT_INVENTORY: "Merritt inventory has it",
    QUEUE_PAUSED: "queue paused",
    MERRITT_INGEST: "Merritt's ingest has it",
    DEPENDENCY_DOWN: "a service it needs is down",
    DISK_SPACE: "disk space",
    HOST_SLOTS: "content host busy",
    LOCALID_LOCK: "local id in use",
    STORAGE_LOCK: "object being stored",
    INVENTORY_LOCK: "object being recorded",
    RETRYING: "a step tried again later",
    WORKER: "waiting for a worker",
}

# The markers the steps' waiting messages carry (pipeline/jobhandlers.py, download.py,
# identify.py), by reason, with the job status the step runs in.
DISK_WAIT = "waiting for disk space"
HOST_WAIT = "waiting for a download slot"
LOCALID_WAIT = "is being resolved by another job"
STORAGE_WAIT = "is being stored by another job"
INVENTORY_WAIT = "is being recorded by another job"
# A step that met a passing failure (a service's answer to ask again, a part file gone) says
# what it does "again later".
RETRY_WAIT = "again later"
# A step an open circuit breaker refused notes the breaker's words (services.breakerstate):
# "EZID unreachable since ...", or "... closed off by hand since ... by <person>: <reason>".
# A host's breaker (a content or callback host) is found only so: no job state names it.
BREAKER_WAIT = " unreachable since "
BREAKER_HAND = " closed off by hand"
MESSAGE_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (DEPENDENCY_DOWN, JOB_STEPS, BREAKER_WAIT),
    (DEPENDENCY_DOWN, JOB_STEPS, BREAKER_HAND),
    (DISK_SPACE, (JobStatus.ESTIMATING, JobStatus.PROVISIONING, JobStatus.DOWNLOADING), DISK_WAIT),
    (HOST_SLOTS, (JobStatus.DOWNLOADING,), HOST_WAIT),
    (LOCALID_LOCK, (JobStatus.PROCESSING,), LOCALID_WAIT),
    (STORAGE_LOCK, (JobStatus.STORING,), STORAGE_WAIT),
    (INVENTORY_LOCK, (JobStatus.RECORDING,), INVENTORY_WAIT),
    (RETRYING, JOB_STEPS, RETRY_WAIT),
)
MERRITT_STEPS: dict[str, str] = {
    JobStatus.STORING: MERRITT_STORAGE,
    JobStatus.RECORDING: MERRITT_INVENTORY,
}

# The order the rules are tried in (``decide``); the project's SQL (jobs.waitquery) follows it.
RULE_ORDER: tuple[str, ...] = (
    HELD,  # and COLLECTION_HELD / MAINTENANCE_WINDOW for a Held item
    MERRITT_STORAGE,
    MERRITT_INVENTORY,
    QUEUE_PAUSED,  # or MAINTENANCE_WINDOW
    COLLECTION_HELD,  # a Pending item not yet moved to Held
    MERRITT_INGEST,
    DEPENDENCY_DOWN,
    *dict.fromkeys(code for code, _, _ in MESSAGE_RULES if code != DEPENDENCY_DOWN),
    WORKER,
)

JOB_DONE = (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.DELETED)
BATCH_DONE = (BatchStatus.COMPLETED, BatchStatus.FAILED, BatchStatus.DELETED)


# --- the facts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pause:
    """The queue pause: since when, by whom, and the maintenance window that set it."""

    since: datetime | None = None
    by: str = ""
    window: int | None = None
    window_ends: datetime | None = None
    reason: str = ""


@dataclass(frozen=True)
class Hold:
    """A collection hold, as the mirror's collection row records it."""

    by: str = ""
    reason: str = ""
    since: datetime | None = None
    window: int | None = None
    window_ends: datetime | None = None


@dataclass(frozen=True)
class Breaker:
    """A dependency's circuit breaker, open: the job states whose steps need it wait."""

    name: str
    since: datetime | None
    next_probe: datetime | None
    states: tuple[str, ...]


@dataclass(frozen=True)
class Disk:
    """The working disk, and the percentage Provisioning keeps it under."""

    total: int
    used: int
    threshold: float

    def to_free(self, needed: int) -> int:
        """Bytes that must free up before ``needed`` more keeps the disk under its
        threshold."""
        allowed = self.total * self.threshold / 100
        return max(0, int(self.used + needed - allowed))


@dataclass(frozen=True)
class QueueFacts:
    """What holds items back queue-wide, read once per page."""

    pause: Pause | None = None
    holds: Mapping[str, Hold] = field(default_factory=dict)
    # A storage lock's node name (``tree.lock_name`` of the ARK) -> the job id it names.
    storage_locks: Mapping[str, str] = field(default_factory=dict)
    breakers: Sequence[Breaker] = ()
    disk: Disk | None = None


@dataclass(frozen=True)
class Item:
    """One job's or batch's row, the fields the decision reads."""

    kind: str  # "job" or "batch"
    id: str
    status: str
    collection: str = ""
    locked: bool = False
    message: str = ""
    ark: str = ""
    space_needed: int = 0
    store_record: str = ""
    # Whether this site's workers take it (``sides.runs_job`` / ``runs_batch`` under
    # ``MQ_WORKERS``); one they leave to Merritt's own ingest waits for that.
    ours: bool = True


@dataclass
class Order:
    """Where an item waiting for a worker stands, and when it should start and finish."""

    position: int
    jobs_ahead: int
    bytes_ahead: int
    starts_at: datetime | None = None
    finishes_at: datetime | None = None


@dataclass
class Waiting:
    code: str
    words: str
    ends: str  # what ends the wait, in words
    ends_at: datetime | None = None
    # Names only staff may read (a person, another collection's job); the API leaves them out.
    public_words: str = ""
    order: Order | None = None

    @property
    def label(self) -> str:
        return REASONS[self.code]

    def as_json(self, public: bool) -> dict:
        """The status API's ``waiting`` object."""
        body: dict = {
            "reason": self.code,
            "words": self.public_words if public and self.public_words else self.words,
            "ends": self.ends,
            "ends_at": _iso(self.ends_at),
        }
        if self.order is not None:
            body.update(
                position=self.order.position,
                jobs_ahead=self.order.jobs_ahead,
                bytes_ahead=self.order.bytes_ahead,
                starts_at=_iso(self.order.starts_at),
                finishes_at=_iso(self.order.finishes_at),
            )
        return body


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


def _at(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC") if when else "an unknown time"


# --- the decision --------------------------------------------------------------------------


def decide(item: Item, facts: QueueFacts) -> Waiting | None:
    """Why ``item`` waits, or None when it is finished, failed or running."""
    done = JOB_DONE if item.kind == "job" else BATCH_DONE
    if item.status in done:
        return None
    hold = facts.holds.get(item.collection)
    if item.status == JobStatus.HELD:  # the same word for a batch
        if hold and not item.message.startswith(review.WAITING):
            return held_collection(hold, item.collection)
        return held(item)
    if item.locked:
        return None
    merritt = MERRITT_STEPS.get(item.status) if item.kind == "job" else None
    if merritt and item.store_record == MERRITT_QUEUE:
        return merritt_turn(merritt)
    if facts.pause is not None:
        return paused(facts.pause)
    if hold is not None and item.status == JobStatus.PENDING:
        return held_collection(hold, item.collection)
    if item.kind == "batch" and item.status != BatchStatus.PENDING:
        return None  # its jobs are under way: each says why it waits
    if not item.ours:
        return Waiting(
            MERRITT_INGEST,
            "this site's workers leave it to Merritt's own ingest",
            "when Merritt's ingest takes it",
        )
    if item.kind == "job":
        for breaker in facts.breakers:
            if item.status in breaker.states:
                return dependency_down(breaker)
        for code, states, marker in MESSAGE_RULES:
            # Case aside, as the database's text search (jobs.waitquery) compares.
            if item.status in states and marker in item.message.lower():
                return stepped(code, item, facts)
    return Waiting(
        WORKER,
        "waiting for a worker",
        "when a worker takes it, in its turn",
        public_words="waiting for a worker",
    )


# The message of a batch awaiting approval (core.approval), up to its profile's name.
AWAITING_APPROVAL = approval.AWAITING_MESSAGE.partition(":")[0] + ":"


def held(item: Item) -> Waiting:
    what = "job" if item.kind == "job" else "batch"
    words = f"this {what} is held" + (f": {item.message}" if item.message else "")
    if item.message.startswith(review.WAITING):
        return Waiting(HELD, words, "when an operator approves or rejects its update")
    if item.kind == "batch" and item.message.startswith(AWAITING_APPROVAL):
        # A release is refused: only a decision moves it.
        return Waiting(HELD, words, "when an operator approves or rejects it")
    return Waiting(HELD, words, "when an administrator releases it")


def held_collection(hold: Hold, collection: str) -> Waiting:
    if hold.window is not None:
        subject = f"collection {collection} is held"
        return by_window(subject, hold.window, hold.reason, hold.window_ends)
    who = f" by {hold.by}" if hold.by else ""
    why = f": {hold.reason}" if hold.reason else ""
    words = f"collection {collection} is held{who} since {_at(hold.since)}{why}"
    public = f"collection {collection} is held since {_at(hold.since)}{why}"
    return Waiting(COLLECTION_HELD, words, "when the hold is lifted", public_words=public)


def by_window(subject: str, window: int, reason: str, ends: datetime | None) -> Waiting:
    words = f"{subject} by maintenance window {window}" + (f" ({reason})" if reason else "")
    return Waiting(MAINTENANCE_WINDOW, words, f"at the window's end, {_at(ends)}", ends)


def merritt_turn(code: str) -> Waiting:
    service = "Merritt storage" if code == MERRITT_STORAGE else "Merritt inventory"
    doing = "stores" if code == MERRITT_STORAGE else "records"
    words = f"{service} has it: its consumer takes the job from the queue"
    return Waiting(code, words, f"when {service} {doing} it and moves it on")


def paused(pause: Pause) -> Waiting:
    if pause.window is not None:
        return by_window("the queue is paused", pause.window, pause.reason, pause.window_ends)
    who = f" by {pause.by}" if pause.by else ""
    why = f": {pause.reason}" if pause.reason else ""
    words = f"the queue is paused{who} since {_at(pause.since)}{why}"
    public = f"the queue is paused since {_at(pause.since)}"
    return Waiting(QUEUE_PAUSED, words, "when an administrator resumes the queue", None, public)


def dependency_down(breaker: Breaker) -> Waiting:
    words = f"{breaker.name} unreachable since {_at(breaker.since)}"
    ends = f"at the next probe, {_at(breaker.next_probe)}, if it answers"
    return Waiting(DEPENDENCY_DOWN, words, ends, breaker.next_probe)


def stepped(code: str, item: Item, facts: QueueFacts) -> Waiting:
    """A step's own decision to wait, worded from its message and what the facts add."""
    if code == DISK_SPACE:
        free = facts.disk.to_free(item.space_needed) if facts.disk else None
        ends = (
            f"when {free} bytes free up on the working disk"
            if free
            else "when the working disk has room for it"
        )
        return Waiting(code, item.message, ends)
    if code == DEPENDENCY_DOWN:
        at = item.message.lower().find(BREAKER_HAND)
        if at < 0:
            return Waiting(code, item.message, "at the breaker's next probe, if it answers")
        # The words name who closed it off: a depositor is told only that it was.
        public = item.message[: at + len(BREAKER_HAND)]
        return Waiting(code, item.message, "when an administrator closes its breaker", None, public)
    if code == STORAGE_LOCK:
        holder = facts.storage_locks.get(_lock_of(item.ark), "")
        if holder and holder != item.id:
            words = f"{item.ark} is being stored by job {holder}"
            return Waiting(code, words, "when that job has stored it", None, item.message)
        return Waiting(code, item.message, "when the other job has stored it")
    ends = {
        HOST_SLOTS: "when a download from that host ends",
        LOCALID_LOCK: "when the other job has resolved that local id",
        INVENTORY_LOCK: "when the other job has recorded it",
        RETRYING: "when the step runs again",
    }[code]
    return Waiting(code, item.message, ends)


def _lock_of(ark: str) -> str:
    try:
        return lock_name(ark) if ark else ""
    except InvalidData:  # no lock can be named after it, so none is held
        return ""
