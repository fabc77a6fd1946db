"""The data a job carries besides its status: priority, space needed, and the optional
nodes a step writes (``identifiers``, ``metadata``, ``inventory``, ``store``).

Guarantee: a data node written mid-step reaches the record the step's status write
returns and tells the listeners (``Shared.data_written``), so neither reads it back. A
priority change rewrites the status at the version read: a worker holding the old record
is refused rather than re-creating the index entry at the old priority.
"""

from __future__ import annotations

from typing import Any

from .. import history as h
from .. import tree as t
from ..errors import InvalidData
from ..records import JobRecord, Op, OpKind, evolve
from .historywrites import History
from .jobs import Jobs
from .shared import Shared


class JobData:
    """Writes of a job's data nodes and priority."""

    def __init__(self, shared: Shared, jobs: Jobs, history: History):
        self.engine = shared.engine
        self.changes = shared.changes
        self.data_written = shared.data_written
        self.jobs = jobs
        self.history = history

    def set_priority(self, job: JobRecord | str, priority: int) -> JobRecord:
        """Change a job's priority, moving its index entry within its state directory."""
        if isinstance(job, str):
            job = self.jobs.get_job(job)
        t.check_priority(priority)
        if priority == job.priority:
            return job
        moved = evolve(job, priority=priority)
        # The status is rewritten as read, not just checked: its version moves on, so a
        # worker still holding the old record is refused instead of committing a move
        # that re-creates the index entry at the old priority.
        status = job.status_json()
        old = self.history.of(t.job_node(job.jid, h.NODE), job.history)
        # Its entry says what changed, and when: the status it rewrites says neither.
        told = status | {
            "message": f"priority {job.priority} -> {priority}",
            "last_modified": t.now(),
        }
        history_op, history = self.history.job_op(
            job.jid, old, job.status_version + 1, job.status, told
        )
        ops = [
            Op(
                OpKind.SET, t.job_node(job.jid, "status"), t.encode_json(status), job.status_version
            ),
            history_op,
            Op(OpKind.SET, t.job_node(job.jid, "priority"), t.encode_int(priority)),
            Op(OpKind.DELETE, job.index_path, tolerant=True),
            Op(OpKind.CREATE, moved.index_path, tolerant=True),
        ]
        results = self.engine.commit(ops, f"job {job.jid} priority")
        moved = evolve(moved, status_version=results[0].version, history=history)
        self.changes.changed("job", job.jid, job.status, moved)
        return moved

    def set_space_needed(self, jid: str, space_needed: int) -> None:
        self.write(jid, "space_needed", space_needed)

    def save_job_data(
        self, jid: str, name: str, value: dict | None, *, exists: bool = True
    ) -> None:
        """Write ``identifiers``, ``metadata``, ``inventory`` or ``store`` at once.

        ``exists`` is the caller's guess whether the node is there (the job record it
        holds tells); a wrong guess costs one more write, never a wrong result.
        """
        if name not in t.JOB_OPTIONAL_NODES:
            raise InvalidData(f"{name!r} is not one of {', '.join(t.JOB_OPTIONAL_NODES)}")
        self.write(jid, name, value, exists=exists)

    def write(self, jid: str, name: str, value: Any, *, exists: bool = True) -> None:
        path, encoded = self.node(jid, name, value)
        self.engine.put(path, encoded, f"job {jid}", exists=exists)
        self._data_changed(jid, name, value)

    def _data_changed(self, jid: str, name: str, value: Any) -> None:
        if len(self.data_written) > 1000:  # a store that writes data of jobs it never moves
            self.data_written.clear()
        self.data_written.setdefault(jid, {})[name] = value
        self.changes.changed("job", jid, None, data={name: value})

    def ops(self, job: JobRecord, data: dict[str, Any]) -> list[Op]:
        ops = []
        for name, value in data.items():
            path, encoded = self.node(job.jid, name, value)
            exists = name == "space_needed" or getattr(job, name) is not None
            ops.append(
                Op(OpKind.SET, path, encoded) if exists else Op(OpKind.CREATE, path, encoded)
            )
        return ops

    def node(self, jid: str, name: str, value: Any) -> tuple[str, bytes]:
        if name == "space_needed":
            if not isinstance(value, int):
                raise InvalidData(f"space_needed must be a whole number, not {value!r}")
            if value < 0:
                raise InvalidData(f"space_needed must not be negative, not {value}")
            return t.job_node(jid, name), t.encode_int(value)
        if name not in t.JOB_OPTIONAL_NODES:
            raise InvalidData(f"{name!r} is not one of {', '.join(t.JOB_OPTIONAL_NODES)}")
        return t.job_node(jid, name), t.encode_json(value)
