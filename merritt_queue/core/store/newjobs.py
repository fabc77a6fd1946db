"""New jobs of a batch: created in order, in few ZooKeeper transactions.

Guarantee: each job is created whole or not at all, in MerrittZK's tree (its nodes, its
``pending`` index entry and its batch's reference), and only while its batch's status is
the one read before: a batch deleted or changed meanwhile gets none of its jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .. import history as h
from .. import tree as t
from ..errors import InvalidData, InvalidTransition, NotFound, QueueError
from ..itemkeys import with_job_id
from ..records import DEFAULT_PRIORITY, JobRecord, NewJob, Op, OpKind
from ..states import BatchStatus, JobStatus
from .historywrites import History
from .shared import Shared

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


class NewJobs:
    """Creating jobs of an existing batch."""

    def __init__(self, shared: Shared, history: History):
        self.engine = shared.engine
        self.reads = shared.reads
        self.changes = shared.changes
        self.history = history

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

    def _require_batch(self, bid: str) -> int:
        """The version of the batch's status node, which every job's creation then checks:
        a batch deleted meanwhile gets no job. A Deleted batch gets none at all: its job
        would bring back the ``batch-processing`` node its deletion removed, on which
        MerrittZK's reporting throws (``batch_sides``)."""
        path = t.batch_node(bid, "status")
        node = self.reads.get_many([path])[path]
        if node is None:
            raise NotFound(f"batch {bid} does not exist; no job was created")
        if (t.decode_json(node[0]) or {}).get("status") == BatchStatus.DELETED:
            raise InvalidTransition(f"batch {bid} was deleted; no job was created in it")
        return node[1].version

    def _created_history(self, jid: str, status: dict) -> tuple[Op, h.History]:
        return self.history.job_op(jid, h.ABSENT, 0, "", status)

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
        if self.changes.listeners:  # the job as written: listeners need not read it back
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
