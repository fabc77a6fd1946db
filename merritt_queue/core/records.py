"""The records the queue store reads and writes: jobs, batches, new jobs, locks, multi ops.

Plain data with no ZooKeeper I/O, so code that only passes records around (handlers, the
mirror, steering) need not know the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from . import tree as t
from .history import History
from .states import BatchStatus
from .steprecord import StepRecord

DEFAULT_PRIORITY = 5


def evolve(record, **changes):
    """``dataclasses.replace`` for our frozen records, without its per-call field scan.

    It runs on every transition; replace() costs several times more.
    """
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__)
    new.__dict__.update(changes)
    return new


@dataclass(frozen=True)
class NewJob:
    """A job to create (``store.new_jobs.create_jobs``)."""

    configuration: dict
    priority: int = DEFAULT_PRIORITY
    space_needed: int = 0
    identifiers: dict | None = None
    metadata: dict | None = None


@dataclass(frozen=True)
class ItemLock:
    """A storage or inventory lock a step took, to let go of in the step's own commit
    (``Outcome.success(unlock=...)``) instead of in a write of its own.

    Deleting it in the commit is safe because the commit checks the job's status version:
    only a force-fail (which changes that version) or a repair of a lock whose job is not
    in Storing takes such a lock away from its holder.
    """

    kind: str  # storage | inventory
    ark: str
    owner: str = ""  # the job id a storage lock records
    # Which take of a storage lock this is (``Locks.lock_storage``): the node's creation
    # and its version after the take. None for a lock whose take was not recorded.
    czxid: int | None = None
    version: int | None = None

    def taken_as(self, stat: Any) -> bool:
        """Whether the lock node ``stat`` describes is still this take of it."""
        if self.czxid is None:
            return True
        return stat.czxid == self.czxid and stat.version == self.version

    @property
    def path(self) -> str:
        return t.storage_lock(self.ark) if self.kind == "storage" else t.inventory_lock(self.ark)


@dataclass(frozen=True)
class Created:
    id: str
    duplicate: bool = False


@dataclass(frozen=True)
class JobRecord:
    """A job as read at one moment; ``status_version`` guards every later move."""

    jid: str
    bid: str | None
    priority: int
    space_needed: int
    configuration: dict | None
    status: str
    last_successful_status: str | None
    last_modified: str
    retry_count: int
    message: str
    status_version: int
    identifiers: dict | None = None
    metadata: dict | None = None
    inventory: dict | None = None
    store: dict | None = None
    locked: bool = False
    lock_session: int | None = None
    # Read by ``job_heads``: only the status, batch, priority and lock are known; the
    # data fields are None because they were not read, not because they are empty.
    partial: bool = False
    # The ``history`` node as read (or as this store last wrote it); None when not read.
    history: History | None = None
    # The ``steps`` node likewise (``steprecord``): read only with a whole job (``get_job``),
    # not by a snapshot, so two reads of the same job compare equal without it.
    steps: StepRecord | None = field(default=None, compare=False)

    @property
    def collection(self) -> str | None:
        return (self.configuration or {}).get("collection")

    @property
    def index_path(self) -> str:
        return t.job_index(self.status, self.priority, self.jid)

    def status_json(self) -> dict[str, Any]:
        return t.job_status_record(
            self.status,
            self.last_successful_status,
            self.retry_count,
            self.message,
            self.last_modified,
        )


@dataclass(frozen=True)
class BatchRecord:
    bid: str
    submission: dict | None
    status: str
    last_modified: str
    message: str
    status_version: int
    acquired: bool = False
    locked: bool = False
    status_report: dict | None = None
    lock_session: int | None = None
    # The ``history`` node as read (or as this store last wrote it); None when not read.
    history: History | None = None
    # The ``approval`` node (``core.approval``): set while the batch awaits a person's approval.
    approval: dict | None = None

    @property
    def awaiting_approval(self) -> bool:
        return self.approval is not None and self.status == BatchStatus.HELD

    @property
    def uuid(self) -> str | None:
        return (self.submission or {}).get("batchID")

    @property
    def collection(self) -> str | None:
        return (self.submission or {}).get("collection")


class OpKind(StrEnum):
    """What an op of a multi does; a str, so comparing with the word still works."""

    CREATE = "create"
    DELETE = "delete"
    SET = "set"
    CHECK = "check"


@dataclass
class Op:
    """One operation of a multi. ``tolerant`` ops keep indexes and are mended, not fatal.
    A ``sequential`` create's path is a prefix: ZooKeeper appends the counter and answers
    with the path it made."""

    kind: OpKind
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False
    tolerant: bool = False
    sequential: bool = False


class ChangeKind(StrEnum):
    """What kind of item a change is about; a str, as ``OpKind``."""

    JOB = "job"
    BATCH = "batch"
    COLLECTION = "collection"


@dataclass(frozen=True)
class Change:
    """What a write changed, for listeners such as the Django mirror (write-through).

    ``record`` is the item as written, or None when it was removed or when only a
    data node changed (the listener re-reads it if it cares).
    """

    kind: ChangeKind
    id: str
    old_status: str | None
    record: JobRecord | BatchRecord | None
    removed: bool = False
    actor: str = ""
    # A data-only write of a job: the nodes written (``space_needed`` or a JSON node) and
    # their values, so a listener can apply them without reading the job back.
    data: dict[str, Any] | None = None


@dataclass
class ReleaseResult:
    """What a release (or a keep) of a collection's held items did: the ids it moved, each
    item's record before and after, and why the others were left."""

    released: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    moved: list[tuple[Any, Any]] = field(default_factory=list)
