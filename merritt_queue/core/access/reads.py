"""Reading the access queues: every request's nodes in one pipelined round (``multiread``).

Access requests are few (Merritt's access service works them in minutes and its admin
tool cleans them up), so a queue is read whole: its listing, then each request's
children, node, status, token, lock and history in one multiRead. Read only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kazoo.client import KazooClient

from .. import history
from .. import multiread as mr
from . import paths as p
from .records import AccessItem, decode_status, decode_token

# Per request, in this order: the status is read before the history (see core.history).
_READS = (
    (mr.CHILDREN, ""),
    (mr.GET, ""),
    (mr.GET, p.STATUS),
    (mr.GET, p.TOKEN),
    (mr.GET, p.LOCK),
    (mr.GET, p.HISTORY),
)


def list_queue(client: KazooClient, queue: str) -> list[str]:
    """The request ids of a queue, sorted (MerrittZK's order); a missing queue is empty."""
    names = mr.read_many(client, [(mr.CHILDREN, p.queue_dir(queue))])[0] or []
    return sorted(n for n in names if p.is_qid(n))


def list_all(client: KazooClient, queues: Sequence[str] = p.QUEUES) -> list[tuple[str, str]]:
    """(queue, qid) of every request of ``queues``, listed in one round. Children that are
    not requests (MerrittZK's ``listJobs`` skips a ``states``) are left out here; check_tree
    reports them (``unknown_entries``)."""
    got = mr.read_many(client, [(mr.CHILDREN, p.queue_dir(q)) for q in queues])
    return [
        (q, n)
        for q, names in zip(queues, got, strict=True)
        for n in sorted(names or ())
        if p.is_qid(n)
    ]


def unknown_entries(client: KazooClient) -> dict[str, list[str]]:
    """Children of /access and of each queue that MerrittZK would not make."""
    dirs = [p.ROOT, *(p.queue_dir(q) for q in p.QUEUES)]
    got = mr.read_many(client, [(mr.CHILDREN, d) for d in dirs])
    out: dict[str, list[str]] = {}
    for d, names in zip(dirs, got, strict=True):
        ok = set(p.QUEUES) if d == p.ROOT else None
        bad = [n for n in names or () if (n not in ok if ok is not None else not p.is_qid(n))]
        if bad:
            out[d] = sorted(bad)
    return out


def read_items(
    client: KazooClient, keys: Iterable[tuple[str, str]]
) -> dict[str, AccessItem | None]:
    """Each (queue, qid)'s request by its key (``small/qid...``); None when it is gone."""
    keys = list(keys)
    requests = [
        (kind, p.item_path(q, qid) + (f"/{name}" if name else ""))
        for q, qid in keys
        for kind, name in _READS
    ]
    got = mr.read_many(client, requests)
    out: dict[str, AccessItem | None] = {}
    for i, (q, qid) in enumerate(keys):
        out[p.key(q, qid)] = _item(q, qid, got[i * len(_READS) : (i + 1) * len(_READS)])
    return out


def read_queues(client: KazooClient, queues: Sequence[str] = p.QUEUES) -> list[AccessItem]:
    """Every request of ``queues`` (both by default), in queue then qid order."""
    return [item for item in read_items(client, list_all(client, queues)).values() if item]


def read_item(client: KazooClient, queue: str, qid: str) -> AccessItem | None:
    return read_items(client, [(queue, qid)])[p.key(queue, qid)]


def paused(client: KazooClient) -> dict[str, bool]:
    """Whether each queue's pause lock (``/locks/queue/accessSmall|accessLarge``) is there."""
    got = mr.read_many(client, [(mr.GET, p.PAUSE_LOCKS[q]) for q in p.QUEUES])
    return {q: r is not None for q, r in zip(p.QUEUES, got, strict=True)}


def _item(queue: str, qid: str, got: list) -> AccessItem | None:
    children, node, status, token, lock, hist = got
    if children is None or node is None:
        return None
    problems = []
    name, status_json, problem = decode_status(status[0] if status else None)
    if problem:
        problems.append(problem)
    token_json, problem = decode_token(token[0] if token else None)
    if problem:
        problems.append(problem)
    owner = lock[1].ephemeralOwner if lock else 0
    return AccessItem(
        queue=queue,
        qid=qid,
        status=name,
        status_version=status[1].version if status else -1,
        status_json=status_json,
        token=token_json,
        locked=lock is not None,
        lock_owner=owner,
        lock_ephemeral=bool(owner) or lock is None,
        lock_ctime_ms=lock[1].ctime if lock else 0,
        created_ms=node[1].ctime,
        status_mtime_ms=status[1].mtime if status else 0,
        children=tuple(sorted(children)),
        history=history.decode(hist[0] if hist else None, exists=hist is not None),
        problems=tuple(problems),
    )
