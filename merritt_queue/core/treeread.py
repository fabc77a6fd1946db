"""Reading the queue tree for the consistency check: every node it judges, pipelined.

Level by level, each level's reads issued at once and collected, at most
WINDOW in flight; a node removed between two levels reads as absent. Reading
never writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from . import multiread as mr
from . import tree as t
from .errors import InvalidData
from .states import BatchStatus, JobStatus

DEFAULT_PRIORITY = 5
# Requests in flight at once: pipelined, yet bounded in memory for huge trees.
WINDOW = 5000
# identifiers are read only when an old storage lock needs them (one node fewer per job).
# A batch's ``history`` is read after its ``status`` (see merritt_queue.core.history): a
# batch repair writes the status and appends to it, and the check reports a damaged one. No
# repair writes a job's status, and jobs' histories would hold every job's record in memory
# at once: not read.
JOB_READS = ("bid", "priority", "status", "lock")
BATCH_READS = ("submission", "status", "history", "status-report", "lock")
JOB_STATUSES = frozenset(s.value for s in JobStatus)
BATCH_STATUSES = frozenset(s.value for s in BatchStatus)

Node = tuple[bytes, ZnodeStat]


def read_pipelined(
    client: KazooClient, requests: list[tuple[str, str]]
) -> dict[tuple[str, str], Any]:
    """Run ``(op, path)`` reads in few round trips; a missing node reads as None.

    ``op`` is ``get``, ``children`` or ``children+stat``. Gets and listings go through the
    shared reader (``multiread``, as the mirror's snapshot does); a listing with its stat,
    which ZooKeeper's multiRead cannot answer, is pipelined WINDOW at a time in flight.
    """
    plain = [req for req in requests if req[0] != "children+stat"]
    kinds = {"get": mr.GET, "children": mr.CHILDREN}
    got = mr.read_many(client, [(kinds[op], path) for op, path in plain]) if plain else []
    out: dict[tuple[str, str], Any] = dict(zip(plain, got, strict=True))
    with_stat = [req for req in requests if req[0] == "children+stat"]
    for start in range(0, len(with_stat), WINDOW):
        window = with_stat[start : start + WINDOW]
        pending = [(req, client.get_children_async(req[1], include_data=True)) for req in window]
        for req, result in pending:
            try:
                out[req] = result.get()
            except NoNodeError:  # removed since its parent was listed: reads as absent
                out[req] = None
    return out


@dataclass
class _Item:
    """A job or batch as read: its own stat, its children and the nodes read under it."""

    id: str
    stat: ZnodeStat
    children: list[str]
    nodes: dict[str, Node] = field(default_factory=dict)
    status: str | None = None
    problem: str | None = None  # why the status cannot be judged

    def node(self, name: str) -> Node | None:
        return self.nodes.get(name)

    def version(self, name: str) -> int:
        return self.nodes[name][1].version

    @property
    def has_status(self) -> bool:
        return "status" in self.nodes


@dataclass
class _Job(_Item):
    bid: str | None = None
    priority: int | None = DEFAULT_PRIORITY
    priority_problem: str | None = None


@dataclass
class _Batch(_Item):
    submission: dict | None = None
    submission_problem: str | None = None
    refs: dict[str, list[str]] = field(default_factory=dict)  # batch-* dir -> names

    @property
    def uuid(self) -> str | None:
        value = (self.submission or {}).get("batchID")
        return str(value) if value else None


@dataclass
class _Tree:
    jobs: dict[str, _Job]
    batches: dict[str, _Batch]
    index: dict[str, list[str]]  # state dir name -> entry names
    uuids: dict[str, Node]
    locks: dict[str, Node]  # path -> node, under /locks/{storage,inventory,localid}


def read_tree(client: KazooClient) -> _Tree:
    """Read everything the check judges, level by level, each level pipelined."""
    roots = [t.JOBS, t.BATCHES, t.BATCH_UUIDS, t.JOB_STATES, *_LOCK_DIRS]
    top = read_pipelined(client, [("children", p) for p in roots])
    names = {p: top[("children", p)] or [] for p in roots}
    jids = sorted(n for n in names[t.JOBS] if t.is_job_id(n))
    bids = sorted(n for n in names[t.BATCHES] if t.is_batch_id(n))
    level2 = _read_level2(client, jids, bids, names)
    job_items = {j: _job_item(j, level2[("children+stat", t.job_path(j))]) for j in jids}
    batch_items = {b: _batch_item(b, level2[("children+stat", t.batch_path(b))]) for b in bids}
    jobs = {j: v for j, v in job_items.items() if v}
    batches = {b: v for b, v in batch_items.items() if v}
    _read_item_nodes(client, jobs, batches)
    uuids = {u: level2[("get", f"{t.BATCH_UUIDS}/{u}")] for u in names[t.BATCH_UUIDS]}
    locks = {f"{d}/{n}": level2[("get", f"{d}/{n}")] for d in _LOCK_DIRS for n in names[d]}
    return _Tree(
        jobs=jobs,
        batches=batches,
        index={d: level2[("children", f"{t.JOB_STATES}/{d}")] or [] for d in names[t.JOB_STATES]},
        uuids={u: node for u, node in uuids.items() if node},
        locks={p: node for p, node in locks.items() if node},
    )


_LOCK_DIRS = (t.LOCK_STORAGE, t.LOCK_INVENTORY, t.LOCK_LOCALID)


def _read_level2(client, jids, bids, names) -> dict:
    reqs = [("children+stat", t.job_path(j)) for j in jids]
    reqs += [("children+stat", t.batch_path(b)) for b in bids]
    reqs += [("children", f"{t.JOB_STATES}/{d}") for d in names[t.JOB_STATES]]
    reqs += [("get", f"{t.BATCH_UUIDS}/{u}") for u in names[t.BATCH_UUIDS]]
    reqs += [("get", f"{d}/{n}") for d in _LOCK_DIRS for n in names[d]]
    return read_pipelined(client, reqs)


def _job_item(jid: str, got) -> _Job | None:
    return _Job(jid, got[1], got[0]) if got else None


def _batch_item(bid: str, got) -> _Batch | None:
    return _Batch(bid, got[1], got[0]) if got else None


def _read_item_nodes(client, jobs: dict[str, _Job], batches: dict[str, _Batch]) -> None:
    """Read the judged nodes of every job and batch, then every batch's reference dirs."""
    reqs: list[tuple[str, str]] = []
    for job in jobs.values():
        # A shell is read whole: its removal must know every child's version.
        wanted = job.children if "status" not in job.children else JOB_READS
        reqs += [("get", t.job_node(job.id, n)) for n in wanted if n in job.children]
    for batch in batches.values():
        reqs += [("get", t.batch_node(batch.id, n)) for n in BATCH_READS if n in batch.children]
        if "states" in batch.children:
            reqs.append(("children", t.batch_states(batch.id)))
    got = read_pipelined(client, reqs)
    for (op, path), value in got.items():
        if op == "get" and value is not None:
            root, item_id, name = path.strip("/").split("/")
            (jobs if root == "jobs" else batches)[item_id].nodes[name] = value
    dirs = [
        (batch, d)
        for batch in batches.values()
        for d in got.get(("children", t.batch_states(batch.id))) or []
    ]
    refs = read_pipelined(client, [("children", t.batch_job_dir(b.id, d)) for b, d in dirs])
    for batch, d in dirs:
        batch.refs[d] = refs[("children", t.batch_job_dir(batch.id, d))] or []
    for job in jobs.values():
        _parse_job(job)
    for batch in batches.values():
        _parse_batch(batch)


def _parse_status(item: _Item, known) -> None:
    node = item.node("status")
    if node is None:
        return
    try:
        value = json.loads(node[0].decode()) if node[0] else None
    except (UnicodeDecodeError, ValueError) as e:
        item.problem = f"its status is not valid JSON ({e})"
        return
    status = value.get("status") if isinstance(value, dict) else None
    if status in known:
        item.status = status
    else:
        item.problem = f"its status {node[0][:80]!r} does not name a known status"


def _parse_job(job: _Job) -> None:
    _parse_status(job, JOB_STATUSES)
    if bid := job.node("bid"):
        job.bid = bid[0].decode(errors="replace") or None
    if priority := job.node("priority"):
        raw = priority[0]
        try:
            job.priority = t.check_priority(int(raw.decode().strip()))
        except (ValueError, UnicodeDecodeError, InvalidData):
            job.priority, job.priority_problem = None, f"its priority {raw[:20]!r} is not 0-99"


def _parse_batch(batch: _Batch) -> None:
    _parse_status(batch, BATCH_STATUSES)
    node = batch.node("submission")
    if node is None or not node[0]:
        return
    try:
        value = json.loads(node[0].decode())
    except (UnicodeDecodeError, ValueError) as e:
        batch.submission_problem = f"its submission is not valid JSON ({e})"
        return
    if isinstance(value, dict):
        batch.submission = value
    else:
        batch.submission_problem = "its submission is not a JSON object"


def _json_field(node: Node | None, name: str) -> str | None:
    try:
        value = json.loads(node[0].decode()) if node and node[0] else None
    except (UnicodeDecodeError, ValueError):  # identifiers are optional to the check
        return None
    found = value.get(name) if isinstance(value, dict) else None
    return found if isinstance(found, str) else None
