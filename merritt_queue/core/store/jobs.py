"""Jobs in the store: creation and reads (one job, or many pipelined)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from kazoo.exceptions import (
    NoNodeError,
)

from .. import history as h
from .. import parking
from .. import tree as t
from ..errors import (
    InvalidData,
    InvalidTransition,
    NotFound,
    QueueError,
)
from ..itemkeys import with_job_id
from ..records import (
    DEFAULT_PRIORITY,
    JobRecord,
    NewJob,
    Op,
    OpKind,
    evolve,
)
from ..states import (
    BatchStatus,
    JobStatus,
)
from .historywrites import HistoryWrites

# Reads of many jobs are pipelined this many at a time: enough to hide the round trip, few
# enough that the requests in flight stay small.
READ_CHUNK = 1000


# Jobs ``create_jobs`` creates a round: one multi for their ids, then the multis of their
# nodes, pipelined.
CREATE_CHUNK = 200


# A job's nodes are written in one multi, and ZooKeeper drops the connection of a request
# over its 1 MB limit (jute.maxbuffer) instead of answering: the request is refused here
# first, far below that limit, so a job can never be a poison pill retried for ever.
MAX_JOB_DATA_BYTES = 64 * 1024


# ``create_jobs`` puts many jobs' nodes in one multi while its request stays within half
# of ZooKeeper's 1 MB limit (the ops' bytes as ``Engine.op_bytes`` bounds them) and within
# an op count that keeps one transaction's work in ZooKeeper moderate whatever the round.
# A job alone always fits: ``MAX_JOB_DATA_BYTES`` is far below either bound.
MAX_MULTI_BYTES = 512 * 1024
MAX_MULTI_OPS = 2500


# The nodes ``job_heads`` reads: all a move needs besides the lock.
HEAD_NODES = ("status", "bid", "priority")


class JobStore(HistoryWrites):
    """Job creation and reads of ``QueueStore``."""

    def create_job(
        self,
        bid: str,
        configuration: dict,
        *,
        priority: int = DEFAULT_PRIORITY,
        space_needed: int = 0,
        identifiers: dict | None = None,
        metadata: dict | None = None,
    ) -> str:
        """Create a Pending job of an existing batch, indexed under its priority: a batch of
        one for ``create_jobs``, whose two transactions it takes.

        1. A sequential create takes the next id (``/jobs/jidNNNNNNNNNN``).
        2. One multi checks the batch's status version and writes every child node, the
           ``pending`` index entry and the batch's ``batch-processing`` reference.
        """
        new = NewJob(configuration, priority, space_needed, identifiers, metadata)
        (jid,) = self.create_jobs(bid, [new])
        return jid

    def create_jobs(self, bid: str, jobs: Sequence[NewJob]) -> list[str]:
        """Create many Pending jobs of a batch, in order, each exactly as ``create_job`` does
        but in few ZooKeeper transactions, ``CREATE_CHUNK`` jobs a round:

        1. One multi of sequential creates takes the round's ids, in order.
        2. The jobs' nodes go in as few multis as fit ``MAX_MULTI_BYTES`` and
           ``MAX_MULTI_OPS``, consecutive jobs each, pipelined. Each multi first checks the
           version of the batch's status that ``create_job`` checks: a batch deleted or
           changed meanwhile gets none of its jobs.

        A multi is all or nothing. On an error the jobs of earlier rounds stay; in the
        failing round, the jobs of the multis ZooKeeper applied stay, the ids of those of a
        refused multi are deleted (none of them exists afterwards), and the error names the
        first job refused.
        """
        if not jobs:
            return []
        for new in jobs:
            self._check_new_job(bid, new)
        check = self._batch_check(bid, self._require_batch(bid))
        created: list[str] = []
        for start in range(0, len(jobs), CREATE_CHUNK):
            chunk = jobs[start : start + CREATE_CHUNK]
            jids = self.engine.create_sequential_many(
                f"{t.JOBS}/{t.JOB_PREFIX}", len(chunk), f"take ids for the jobs of batch {bid}"
            )
            chunk = [
                replace(new, configuration=with_job_id(new.configuration, jid))
                for jid, new in zip(jids, chunk, strict=True)
            ]
            statuses = [t.job_status_record(JobStatus.PENDING) for _ in chunk]
            groups = self._job_multis(
                check,
                [
                    self._job_create_ops(bid, jid, new, st)
                    for jid, new, st in zip(jids, chunk, statuses, strict=True)
                ],
            )
            results = self.engine.commit_many(
                [(ops, self._creating(bid, jids[first:end])) for first, end, ops in groups]
            )
            error, refused = None, []
            for (first, end, _), result in zip(groups, results, strict=True):
                if isinstance(result, QueueError):
                    refused += [t.job_path(jid) for jid in jids[first:end]]
                    error = error or result
                    continue
                for i in range(first, end):
                    self._job_created(bid, jids[i], chunk[i], statuses[i])
                    created.append(jids[i])
            self.engine.delete_quietly_many(refused)
            if error is not None:
                raise error
        return created

    def _job_multis(
        self, check: Op, jobs_ops: Sequence[list[Op]]
    ) -> list[tuple[int, int, list[Op]]]:
        """Consecutive jobs' ops in as few multis as fit, each headed by the batch's check:
        (first job, end, the multi's ops)."""
        size_of = self.engine.op_bytes
        groups = []
        first, ops, size = 0, [check], size_of(check)
        for i, job_ops in enumerate(jobs_ops):
            job_size = sum(size_of(op) for op in job_ops)
            if i > first and (
                size + job_size > MAX_MULTI_BYTES or len(ops) + len(job_ops) > MAX_MULTI_OPS
            ):
                groups.append((first, i, ops))
                first, ops, size = i, [check], size_of(check)
            ops += job_ops
            size += job_size
        groups.append((first, len(jobs_ops), ops))
        return groups

    @staticmethod
    def _creating(bid: str, jids: Sequence[str]) -> str:
        """What a multi of ``jids`` does, for its error: named by its first job, the first
        refused when ZooKeeper refuses the multi."""
        if len(jids) == 1:
            return f"create job {jids[0]} in batch {bid}"
        return f"create job {jids[0]} and {len(jids) - 1} more in batch {bid}"

    @staticmethod
    def _check_new_job(bid: str, new: NewJob) -> None:
        t.check_id(t.BATCH_PREFIX, bid)
        t.check_priority(new.priority)
        if not isinstance(new.configuration, dict):
            raise InvalidData("a job configuration must be a JSON object")
        if new.space_needed < 0:
            raise InvalidData(f"space_needed must not be negative, not {new.space_needed}")
        size = sum(
            len(t.encode_json(value))
            for value in (new.configuration, new.identifiers, new.metadata)
            if value is not None
        )
        if size > MAX_JOB_DATA_BYTES:
            row = new.configuration.get("manifest_line")
            where = f"the job of manifest line {row}" if row else "the job"
            raise InvalidData(
                f"{where} would hold {size} bytes of data, over the limit of "
                f"{MAX_JOB_DATA_BYTES} bytes per job; shorten its fields"
            )

    def job_count(self) -> int:
        """Jobs in the tree, any status, from one stat of ``/jobs`` (no listing)."""
        stat = self.engine.exists(t.JOBS)
        # Besides the jobs, /jobs holds one container: the state index (``/jobs/states``).
        return max(0, stat.numChildren - 1) if stat else 0

    def _require_batch(self, bid: str) -> int:
        """The version of the batch's status node, which every job's creation then checks:
        a batch deleted meanwhile gets no job. A Deleted batch gets none at all: its job
        would bring back the ``batch-processing`` node its deletion removed, on which
        MerrittZK's reporting throws (``batch_sides``)."""
        path = t.batch_node(bid, "status")
        node = self.engine.get_many([path])[path]
        if node is None:
            raise NotFound(f"batch {bid} does not exist; no job was created")
        if (t.decode_json(node[0]) or {}).get("status") == BatchStatus.DELETED:
            raise InvalidTransition(f"batch {bid} was deleted; no job was created in it")
        return node[1].version

    def _created_history(self, jid: str, status: dict) -> tuple[Op, h.History]:
        return self._job_history_op(jid, h.ABSENT, 0, "", status)

    @staticmethod
    def _batch_check(bid: str, batch_version: int) -> Op:
        """The op each multi creating jobs holds: the batch's status is still the one read."""
        return Op(OpKind.CHECK, t.batch_node(bid, "status"), version=batch_version)

    def _job_create_ops(self, bid: str, jid: str, new: NewJob, status: dict) -> list[Op]:
        """The job's nodes, its index entry and its batch's reference, MerrittZK's tree."""
        ops = [
            Op(OpKind.CREATE, t.job_node(jid, "bid"), t.encode_str(bid)),
            Op(OpKind.CREATE, t.job_node(jid, "priority"), t.encode_int(new.priority)),
            Op(OpKind.CREATE, t.job_node(jid, "space_needed"), t.encode_int(new.space_needed)),
            Op(OpKind.CREATE, t.job_node(jid, "configuration"), t.encode_json(new.configuration)),
            Op(OpKind.CREATE, t.job_node(jid, "status"), t.encode_json(status)),
            self._created_history(jid, status)[0],
        ]
        for name, value in (("identifiers", new.identifiers), ("metadata", new.metadata)):
            if value is not None:
                ops.append(Op(OpKind.CREATE, t.job_node(jid, name), t.encode_json(value)))
        return ops + [
            Op(OpKind.CREATE, t.job_index(JobStatus.PENDING, new.priority, jid), tolerant=True),
            Op(OpKind.CREATE, t.batch_job_ref(bid, JobStatus.PENDING, jid), tolerant=True),
        ]

    def _job_created(self, bid: str, jid: str, new: NewJob, status: dict) -> None:
        if self.listeners:  # the job as written: listeners need not read it back
            record = JobRecord(
                jid=jid,
                bid=bid,
                priority=new.priority,
                space_needed=new.space_needed,
                configuration=new.configuration,
                status=status["status"],
                last_successful_status=status["last_successful_status"],
                last_modified=status["last_modified"],
                retry_count=status["retry_count"],
                message=status["message"],
                status_version=0,
                identifiers=new.identifiers,
                metadata=new.metadata,
                history=self._created_history(jid, status)[1],
            )
            self.changes.changed("job", jid, None, record)

    def get_job(self, jid: str, *, locked: bool | None = None) -> JobRecord:
        """The whole job; ``locked``: whether its lock is there, when the caller knows (it
        has just taken it), else read."""
        t.check_id(t.JOB_PREFIX, jid)
        lock = None if locked is not None else self.client.exists_async(t.job_node(jid, "lock"))
        self.stats["round_trips"] += 1
        read = self._send_job_read(jid)
        if lock is not None:
            locked = parking.held(lock.get())
        return self._job_from_read(jid, read, bool(locked))

    def _send_job_read(self, jid: str) -> Callable[[], dict[str, Any]]:
        # The history after the status: see ``history`` for why the order matters.
        names = ("bid", "priority", "space_needed", *t.JOB_JSON_NODES, h.NODE)
        return self.engine.get_many_later(t.job_node(jid, n) for n in names)

    def _job_from_read(
        self, jid: str, read: Callable[[], dict[str, Any]], locked: bool
    ) -> JobRecord:
        """The job from ``_send_job_read``'s answer; NotFound, or InvalidData."""
        got = read()
        status = got[t.job_node(jid, "status")]
        if status is None:
            raise NotFound(f"job {jid} does not exist")

        def value(name: str) -> bytes | None:
            node = got[t.job_node(jid, name)]
            return node[0] if node else None

        try:
            return self._job_record(jid, status, value, locked)
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
            got = self.engine.get_many(t.job_node(jid, name) for jid in chunk)
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
                record = self._job_record(
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

    @staticmethod
    def _job_record(jid, status, value, locked, *, history_read: bool = True) -> JobRecord:
        """``value(name)``: a node's data, None when missing. ``history_read=False``: the
        ``history`` node was not read, so the record's history is None (unknown)."""
        st = t.decode_json(status[0]) or {}
        history = None
        if history_read:
            data = value(h.NODE)
            history = h.decode(data, data is not None)
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
        )

    def list_job_ids(self) -> list[str]:
        return sorted(c for c in self.engine.children(t.JOBS) if t.is_job_id(c))

    def jobs_in_state(self, status: str, watch=None) -> list[tuple[int, str]]:
        """``(priority, jid)`` of the index directory of ``status``, in serving order;
        ``watch`` is called once on the directory's next change."""
        entries = (
            t.parse_index_name(n) for n in self.engine.children(t.job_state_dir(status), watch)
        )
        return sorted(e for e in entries if e)
