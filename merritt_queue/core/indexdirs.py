"""How many bytes a ``getChildren`` of each index directory carries, against the client's limit.

A Java ZooKeeper client (Merritt's ingest, its admin tool) refuses any response whose frame is
at least ``jute.maxbuffer`` bytes (0xfffff by default): past that a directory cannot be listed
at all, and every Merritt consumer that lists it fails. The frame of a ``getChildren`` answer
is the reply header (xid, zxid, error code), the vector's length, and per child a 4-byte
length and its UTF-8 name.

Measuring must stay cheap with a million children: a directory whose names all have one known
width is measured from ``numChildren`` in its stat (exact, as the ids' counters have a fixed
width); the others are listed only while small, and estimated from ``numChildren`` beyond.
Every stat and listing of one measure is issued before any is collected.

The per-batch directories (``/batches/<bid>/states/batch-*``) are not measured here: they
hold at most one batch's jobs, which the door bounds (``MQ_MAX_BATCH_JOBS``).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import tree as t
from .states import JobStatus

# ZooKeeper's default jute.maxbuffer, the limit a Java client applies to every frame it reads.
DEFAULT_MAXBUFFER = 0xFFFFF
# xid (4) + zxid (8) + err (4), then the vector's element count (4).
HEADER_BYTES = 16 + 4
# Below this a client could not even read a job's data (64 KB, ``newjobs.MAX_JOB_DATA_BYTES``).
MIN_MAXBUFFER = 128 * 1024
PER_CHILD_BYTES = 4
# From this share of the limit the check, /healthz and /metrics warn.
WARN_FRACTION = 0.7

ID_WIDTH = len("jid0000000000")
INDEX_WIDTH = len("05-jid0000000000")
# A batchID as Merritt writes it (``bid-`` and a UUID), with room for a re-run's suffix:
# the estimate of ``/batch-uuids`` once too large to list, on the high side.
UUID_WIDTH = len("bid-00000000-0000-0000-0000-000000000000~rerun-99")
# Listed (exact) while its estimate stays under this many bytes: a few round trips' worth.
LIST_BELOW_BYTES = 64 * 1024


@dataclass(frozen=True)
class IndexDir:
    path: str
    # Every child's name has this many bytes (an upper bound for the few that have fewer);
    # None: the names vary, listed while small.
    width: int | None
    estimate_width: int


def index_dirs() -> list[IndexDir]:
    """The directories whose children grow with the number of jobs or batches."""
    dirs = [
        IndexDir(t.JOBS, ID_WIDTH, ID_WIDTH),
        IndexDir(t.BATCHES, ID_WIDTH, ID_WIDTH),
        IndexDir(t.BATCH_UUIDS, None, UUID_WIDTH),
    ]
    dirs += [IndexDir(t.job_state_dir(s), INDEX_WIDTH, INDEX_WIDTH) for s in JobStatus]
    return dirs


def listing_bytes(names: list[str]) -> int:
    """The frame of a ``getChildren`` answer naming ``names``."""
    return HEADER_BYTES + sum(PER_CHILD_BYTES + len(n.encode()) for n in names)


def estimate_bytes(children: int, width: int) -> int:
    return HEADER_BYTES + children * (PER_CHILD_BYTES + width)


@dataclass(frozen=True)
class DirSize:
    path: str
    children: int
    bytes: int
    exact: bool
    limit: int

    @property
    def ratio(self) -> float:
        return self.bytes / self.limit

    @property
    def warning(self) -> bool:
        return self.ratio >= WARN_FRACTION

    def as_dict(self) -> dict:
        return {
            "path": self.path,
            "children": self.children,
            "bytes": self.bytes,
            "limit": self.limit,
            "percent": round(100 * self.ratio, 1),
            "exact": self.exact,
        }


def measure(client, limit: int = DEFAULT_MAXBUFFER, timeout: float = 10.0) -> list[DirSize]:
    """Each index directory's listing size (a missing directory lists nothing)."""
    dirs = index_dirs()
    stats = [(d, client.exists_async(d.path)) for d in dirs]
    sized: list[tuple[IndexDir, int]] = []
    for d, pending in stats:
        stat = pending.get(timeout=timeout)
        sized.append((d, stat.numChildren if stat else 0))
    listings = {
        d.path: client.get_children_async(d.path)
        for d, n in sized
        if d.width is None and n and estimate_bytes(n, d.estimate_width) < LIST_BELOW_BYTES
    }
    out = []
    for d, n in sized:
        if d.path in listings:
            names = listings[d.path].get(timeout=timeout)
            out.append(DirSize(d.path, len(names), listing_bytes(names), True, limit))
        else:
            exact = d.width is not None or n == 0
            out.append(DirSize(d.path, n, estimate_bytes(n, d.estimate_width), exact, limit))
    return out


def fraction_of(sizes: list[DirSize], path: str) -> float:
    return next((s.ratio for s in sizes if s.path == path), 0.0)
