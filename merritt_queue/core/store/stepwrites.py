"""The store's side of the ``steps`` node: an attempt's summary, kept with its outcome.

Guarantees:

- A step that commits (success, failure, a move, "later") appends its attempt in the
  commit's own multi (``op``, used by ``jobmoves``): no write or round trip of its own. The
  node needs no version check of its own, for the reason ``history`` needs none: it is read
  with the whole job under the lock, and written only in a multi checked on the status
  version read then, so a write from an older read is refused.
- An attempt abandoned without a commit is kept alone (``save_unfinished``) only while its
  fence passes (same session, never lost) and the job is still at the status version and
  lock it ran under: a stale attempt never overwrites a newer attempt's record.
"""

from __future__ import annotations

from typing import Any

from .. import steprecord as sr
from .. import tree as t
from ..attempt import Attempt
from ..records import JobRecord, Op, OpKind
from .shared import Shared


class Steps:
    """Appends to a job's ``steps`` node."""

    def __init__(self, shared: Shared):
        self.client = shared.client
        self.engine = shared.engine
        self.reads = shared.reads
        self.changes = shared.changes

    def read(self, jid: str) -> sr.StepRecord:
        node = self.reads.get_many([t.job_node(jid, sr.NODE)])[t.job_node(jid, sr.NODE)]
        return sr.decode(node[0] if node else None, node is not None)

    def op(self, job: JobRecord, summary: dict[str, Any]) -> tuple[Op, sr.StepRecord]:
        """The op appending ``summary`` to ``job``'s node, and the record it leaves."""
        old = job.steps if job.steps is not None else self.read(job.jid)
        new, data = sr.append(old, summary)
        path = t.job_node(job.jid, sr.NODE)
        return (Op(OpKind.SET, path, data) if old.exists else Op(OpKind.CREATE, path, data)), new

    def save_unfinished(
        self, job: JobRecord, attempt: Attempt, summary: dict[str, Any]
    ) -> sr.StepRecord | None:
        """Keep the summary of an attempt that commits nothing; None when it may not (its
        fence no longer passes, ZooKeeper is away, or the job moved on)."""
        if not self.client.connected:
            return None  # no wait here: the step is being abandoned for an outage
        attempt.check("record what it did")
        op, new = self.op(job, summary)
        ops = [
            Op(OpKind.CHECK, t.job_node(job.jid, "status"), version=job.status_version),
            Op(OpKind.CHECK, t.job_node(job.jid, "lock")),
            op,
        ]
        self.engine.commit(ops, f"job {job.jid} steps")
        self.changes.changed("job", job.jid, None, data={sr.NODE: new})
        return new
