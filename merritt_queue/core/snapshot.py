"""Many jobs and batches read at once as the store's records; the listing of the whole tree.

The reader behind the Django mirror (mirror). It differs from the
consistency check's ``read_tree`` in what it reads: every node a record holds
(configuration, identifiers, metadata, ...) rather than the few the check
judges, through ZooKeeper's multiRead (merritt_queue.core.multiread), so 100,000
jobs are read in seconds.

Guarantees:

- Reading never writes, and leaves no watch.
- Records are built by the store's own parsers, so a job read here equals
  ``store.jobs.get_job`` of the same moment.
- An item without a status node is reported as missing (removed, or its
  creation not committed yet); one whose data does not parse is reported as
  unreadable, with why, and never guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient

from . import jobids
from . import multiread as mr
from . import tree as t
from .approval import APPROVAL
from .history import NODE
from .records import evolve
from .store import BatchRecord, JobRecord
from .store.batches import batch_record
from .store.historywrites import decode_node
from .store.jobs import job_record

# ``history`` after ``status``: see ``history`` for why the order matters.
JOB_NODES = ("bid", "priority", "space_needed", *t.JOB_JSON_NODES, NODE, "lock")
BATCH_NODES = ("submission", "status", NODE, "status-report", "states", "lock", APPROVAL)
LOCK_DIRS = (t.LOCK_QUEUE, t.LOCK_COLLECTIONS, t.LOCK_STORAGE, t.LOCK_INVENTORY, t.LOCK_LOCALID)
# Jobs per chunk of ``iter_jobs``: one database transaction of the mirror each.
JOB_CHUNK = 2000


@dataclass
class Items:
    """Records read, by id, and what could not be made a record."""

    records: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    # path of each item lock found -> its stat (ctime, ephemeralOwner)
    locks: dict[str, Any] = field(default_factory=dict)


class _Pending:
    def __init__(self, client: KazooClient, kind: str, ids: list[str], history: bool = True):
        self.kind, self.ids = kind, ids
        names: tuple[str, ...] = JOB_NODES if kind == "job" else BATCH_NODES
        if not history:
            names = tuple(n for n in names if n != NODE)
        node = t.job_node if kind == "job" else t.batch_node
        self.names = names
        self.reads = mr.start(client, [(mr.GET, node(i, n)) for i in ids for n in names])

    def result(self) -> Items:
        got = iter(self.reads.results())
        items = Items()
        for item_id in self.ids:
            nodes = {n: next(got) for n in self.names}
            _add(items, self.kind, item_id, nodes)
        return items


def add_job_histories(client: KazooClient, records: list[JobRecord]) -> list[JobRecord]:
    """``records`` (read without their history) with it, read in one pipelined round.

    Read after the records' status, as ``history`` requires: a history newer than the
    status read holds entries past the record's version, which readers leave for later.
    """
    paths = [t.job_node(r.jid, NODE) for r in records]
    got = mr.read_many(client, [(mr.GET, p) for p in paths]) if paths else []
    return [evolve(r, history=decode_node(node)) for r, node in zip(records, got, strict=True)]


def _add(items: Items, kind: str, item_id: str, nodes: dict) -> None:
    if nodes["status"] is None:
        items.missing.append(item_id)
        return
    if nodes["lock"] is not None:
        path = (t.job_node if kind == "job" else t.batch_node)(item_id, "lock")
        items.locks[path] = nodes["lock"][1]
    try:
        items.records[item_id] = (_job if kind == "job" else _batch)(item_id, nodes)
    except (ValueError, TypeError, AttributeError) as e:
        items.unreadable[item_id] = f"unreadable data ({e})"


def _job(jid: str, nodes: dict) -> JobRecord:
    def value(name: str) -> bytes | None:
        node = nodes[name]
        return node[0] if node else None

    return job_record(
        jid, nodes["status"], value, nodes["lock"] is not None, history_read=NODE in nodes
    )


def _batch(bid: str, nodes: dict) -> BatchRecord:
    return batch_record(
        bid,
        nodes["submission"],
        nodes["status"],
        nodes["status-report"],
        nodes["states"] is not None,
        nodes["lock"],
        history=nodes[NODE],
        approval=nodes[APPROVAL],
    )


def start_jobs(client: KazooClient, jids: Iterable[str], history: bool = True) -> _Pending:
    """Send the reads of ``jids`` now; ``.result()`` waits and gives an ``Items``.
    ``history=False``: the records' history is None (not read)."""
    return _Pending(client, "job", list(jids), history)


def read_jobs(client: KazooClient, jids: Iterable[str]) -> Items:
    return start_jobs(client, jids).result()


def read_batches(client: KazooClient, bids: Iterable[str]) -> Items:
    return _Pending(client, "batch", list(bids)).result()


def iter_jobs(
    client: KazooClient, jids: Iterable[list[str]], history: bool = True
) -> Iterator[Items]:
    """``read_jobs`` of each chunk of ``jids``; the next chunk is in flight while the
    caller works on this one, so a few chunks are held at once whatever the tree's size."""
    chunks = iter(jids)
    first = next(chunks, None)
    if first is None:
        return
    pending = start_jobs(client, first, history)
    for following in chunks:
        current, pending = pending, start_jobs(client, following, history)
        yield current.result()
        del current
    yield pending.result()


@dataclass
class Listing:
    """Every job and batch id, and every lock node (path -> (data, stat))."""

    jids: jobids.JobIds
    bids: list[str]
    locks: dict[str, tuple[bytes, Any]]


def collection_holds(locks: dict[str, tuple[bytes, Any]]) -> dict[str, dict]:
    """Held collections (from lock nodes) -> who held them, why and when ({} if not recorded)."""
    prefix = t.LOCK_COLLECTIONS + "/"
    return {
        path[len(prefix) :]: _hold(node[0])
        for path, node in locks.items()
        if path.startswith(prefix)
    }


def _hold(data: bytes) -> dict:
    try:
        value = json.loads(data.decode()) if data else {}
    except (UnicodeDecodeError, ValueError):  # written by another tool: held, details unknown
        return {}
    return value if isinstance(value, dict) else {}


def _read_lock_nodes(client: KazooClient, names: dict[str, list[str] | None]) -> dict:
    paths = [f"{d}/{n}" for d in LOCK_DIRS for n in names[d] or []]
    nodes = mr.read_many(client, [(mr.GET, p) for p in paths])
    return {p: node for p, node in zip(paths, nodes, strict=True) if node is not None}


def read_locks(client: KazooClient) -> dict[str, tuple[bytes, Any]]:
    """Every node under /locks/{queue,collections,storage,inventory,localid}."""
    names = mr.read_many(client, [(mr.CHILDREN, d) for d in LOCK_DIRS])
    return _read_lock_nodes(client, dict(zip(LOCK_DIRS, names, strict=True)))


def read_listing(client: KazooClient) -> Listing:
    """The ids of every job and batch and every lock node, in three pipelined rounds; the
    job ids held compactly (``jobids``)."""
    jobs = jobids.start(client)
    dirs = [t.BATCHES, *LOCK_DIRS]
    top = dict(zip(dirs, mr.read_many(client, [(mr.CHILDREN, d) for d in dirs]), strict=True))
    return Listing(
        jids=jobids.read(jobs),
        bids=sorted(n for n in top[t.BATCHES] or [] if t.is_batch_id(n)),
        locks=_read_lock_nodes(client, top),
    )
