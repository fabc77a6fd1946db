"""Jobs read from the store: one job whole, many jobs' heads, one node of many jobs.

Guarantee: reading never writes. A job's nodes are read in one round, its history after
its status (see ``history``), so a record never carries a history behind its status.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kazoo.exceptions import NoNodeError

from .. import history as h
from .. import parking
from .. import steprecord as sr
from .. import tree as t
from ..errors import InvalidData, NotFound, QueueError
from ..records import DEFAULT_PRIORITY, JobRecord, evolve
from .shared import Shared

# Reads of many jobs are pipelined this many at a time: enough to hide the round trip, few
# enough that the requests in flight stay small.
READ_CHUNK = 1000


# The nodes ``job_heads`` reads: all a move needs besides the lock.
HEAD_NODES = ("status", "bid", "priority")


def job_record(
    jid, status, value, locked, *, history_read: bool = True, steps_read: bool = False
) -> JobRecord:
    """``value(name)``: a node's data, None when missing. ``history_read=False``: the
    ``history`` node was not read, so the record's history is None (unknown); likewise
    ``steps_read`` and the ``steps`` node."""
    st = t.decode_json(status[0]) or {}
    history = steps = None
    if history_read:
        data = value(h.NODE)
        history = h.decode(data, data is not None)
    if steps_read:
        data = value(sr.NODE)
        steps = sr.decode(data, data is not None)
    return JobRecord(
        jid=jid,
        bid=t.decode_str(value("bid")),
        priority=t.decode_int(value("priority"), DEFAULT_PRIORITY),
        space_needed=t.decode_int(value("space_needed"), 0),
        configuration=t.decode_json(value("configuration")),
        status=st.get("status", ""),
        last_successful_status=st.get("last_successful_status"),
        last_modified=st.get("last_modified") or "",
        retry_count=int(st.get("retry_count") or 0),
        message=st.get("message") or "",
        status_version=status[1].version,
        identifiers=t.decode_json(value("identifiers")),
        metadata=t.decode_json(value("metadata")),
        inventory=t.decode_json(value("inventory")),
        store=t.decode_json(value("store")),
        locked=locked,
        history=history,
        steps=steps,
    )


class Jobs:
    """Reads of jobs: whole records, partial heads, index listings."""

    def __init__(self, shared: Shared):
        self.client = shared.client
        self.reads = shared.reads
        self.stats = shared.stats

    def get_job(self, jid: str, *, locked: bool | None = None) -> JobRecord:
        """The whole job; ``locked``: whether its lock is there, when the caller knows (it
        has just taken it), else read."""
        t.check_id(t.JOB_PREFIX, jid)
        lock = None if locked is not None else self.client.exists_async(t.job_node(jid, "lock"))
        self.stats["round_trips"] += 1
        read = self.send_read(jid)
        if lock is not None:
            locked = parking.held(lock.get())
        return self.from_read(jid, read, bool(locked))

    def send_read(self, jid: str) -> Callable[[], dict[str, Any]]:
        # The history after the status: see ``history`` for why the order matters. The
        # steps node rides in the same round: the worker that locked the job appends to it.
        names = ("bid", "priority", "space_needed", *t.JOB_JSON_NODES, h.NODE, sr.NODE)
        return self.reads.get_many_later(t.job_node(jid, n) for n in names)

    def from_read(self, jid: str, read: Callable[[], dict[str, Any]], locked: bool) -> JobRecord:
        """The job from ``send_read``'s answer; NotFound, or InvalidData."""
        got = read()
        status = got[t.job_node(jid, "status")]
        if status is None:
            raise NotFound(f"job {jid} does not exist")

        def value(name: str) -> bytes | None:
            node = got[t.job_node(jid, name)]
            return node[0] if node else None

        try:
            return job_record(jid, status, value, locked, steps_read=True)
        except (ValueError, TypeError, AttributeError) as e:
            raise InvalidData(f"job {jid} has unreadable data ({e}); run check_tree") from None

    def job_node_values(
        self, jids: Sequence[str], name: str, decode: Callable[[bytes], Any] = t.decode_json
    ) -> dict[str, Any]:
        """The decoded ``name`` node (``status``, ``identifiers``, ...) of each job, read in
        pipelined rounds; None for a job or node that is missing. Plain-text nodes (``bid``)
        take ``decode=tree.decode_str``."""
        out: dict[str, Any] = {}
        for start in range(0, len(jids), READ_CHUNK):
            chunk = jids[start : start + READ_CHUNK]
            got = self.reads.get_many(t.job_node(jid, name) for jid in chunk)
            for jid in chunk:
                node = got[t.job_node(jid, name)]
                out[jid] = decode(node[0]) if node else None
        return out

    def job_heads(
        self, jids: Sequence[str], known: dict[str, tuple[int, str | None, int]] | None = None
    ) -> dict[str, JobRecord | QueueError]:
        """What moving each job needs (status, batch, priority, lock), in pipelined rounds.

        The records are ``partial``: a bulk action moves thousands of jobs and reads
        four small nodes of each instead of all thirteen. ``known`` maps a job to the
        ``(status version, batch, priority)`` seen elsewhere (the mirror row the
        confirmation page showed): when the status node is still at that version, the
        batch and priority are taken from it and not read, since a job never changes
        batch and a priority change moves the status version (``set_priority``).
        """
        known = known or {}
        out: dict[str, JobRecord | QueueError] = {}
        valid = []
        for jid in jids:
            if t.is_job_id(jid):
                valid.append(jid)
            else:
                out[jid] = InvalidData(f"{jid!r} is not a valid job id")
        got = self._head_reads(valid, lambda jid: ("status",) if jid in known else HEAD_NODES)
        again = [
            jid
            for jid in valid
            if jid in known
            and got[jid][0]["status"]
            and got[jid][0]["status"][1].version != known[jid][0]
        ]
        got.update(self._head_reads(again, lambda jid: HEAD_NODES))
        for jid in valid:
            nodes, locked = got[jid]
            if nodes["status"] is None:
                out[jid] = NotFound(f"job {jid} does not exist")
                continue
            if "bid" not in nodes:
                _, bid, priority = known[jid]  # as the nodes would read
                nodes["bid"] = (t.encode_str(bid), None)
                nodes["priority"] = (t.encode_int(priority), None)
            try:
                record = job_record(
                    jid,
                    nodes["status"],
                    lambda n, nodes=nodes: nodes[n][0] if nodes.get(n) else None,
                    locked,
                    history_read=False,
                )
            except (ValueError, TypeError, AttributeError) as e:
                out[jid] = InvalidData(f"job {jid} has unreadable data ({e}); run check_tree")
                continue
            out[jid] = evolve(record, partial=True)
        return out

    def _head_reads(self, jids, names_of) -> dict[str, tuple[dict[str, Any], bool]]:
        """``names_of(jid)`` nodes and the lock's existence of each job, in one round."""
        sent = {
            jid: (
                {n: self.client.get_async(t.job_node(jid, n)) for n in names_of(jid)},
                self.client.exists_async(t.job_node(jid, "lock")),
            )
            for jid in jids
        }
        if sent:
            self.stats["round_trips"] += 1
        out = {}
        for jid, (reads, lock) in sent.items():
            nodes: dict[str, Any] = {}
            for name, pending in reads.items():
                try:
                    nodes[name] = pending.get()
                except NoNodeError:
                    nodes[name] = None
            out[jid] = (nodes, parking.held(lock.get()))
        return out

    def list_job_ids(self) -> list[str]:
        return sorted(c for c in self.reads.children(t.JOBS) if t.is_job_id(c))

    def jobs_in_state(self, status: str, watch=None) -> list[tuple[int, str]]:
        """``(priority, jid)`` of the index directory of ``status``, in serving order;
        ``watch`` is called once on the directory's next change."""
        entries = (
            t.parse_index_name(n) for n in self.reads.children(t.job_state_dir(status), watch)
        )
        return sorted(e for e in entries if e)

    def job_count(self) -> int:
        """Jobs in the tree, any status, from one stat of ``/jobs`` (no listing)."""
        stat = self.reads.exists(t.JOBS)
        # Besides the jobs, /jobs holds one container: the state index (``/jobs/states``).
        return max(0, stat.numChildren - 1) if stat else 0
