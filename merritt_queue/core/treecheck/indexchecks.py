"""The consistency check's findings about where a job is listed: its entry in the queue index
(``/jobs/states/<state>/PP-JID``) and its reference under its batch
(``/batches/BID/states/<dir>/JID``), and entries naming no job.

Functions of the checker (``checker.Checker``), as ``lockchecks`` are. Each repair
checks the job's status (and the node that decides the right entry) at the version the check
read, so a job that moved since is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import tree as t
from ..states import batch_dir_for
from . import treerepair as r
from .treerepair import Op

if TYPE_CHECKING:
    from ..treeread import _Job
    from .checker import Checker, Finding


def check_index(checker: Checker, job: _Job) -> None:
    # ``check_job`` comes here only for a job whose status and priority it could read.
    assert job.status is not None and job.priority is not None
    right = t.job_index(job.status, job.priority, job.id)
    entries = checker.index_by_jid.get(job.id, [])
    wrong = sorted(p for p in entries if p != right)
    has_right = right in entries
    if has_right and not wrong:
        return
    group: list[Finding] = []
    state = f"{job.status} with priority {job.priority:02d}"
    if not has_right:
        group.append(
            checker.add(
                "missing-index",
                right,
                f"Job {job.id} is {state} but has no entry in the {job.status} queue, "
                "so no worker will pick it up.",
                f"create {right}",
            )
        )
    for p in wrong:
        if has_right:
            kind = "duplicate-index"
            reason = (
                f"Job {job.id} is indexed {len(entries)} times; only {right} matches ({state})."
            )
        else:
            kind = "stale-index"
            reason = f"Index entry {p} names job {job.id}, which is {state}."
        group.append(checker.add(kind, p, reason, f"delete {p}"))
    ops = checker.job_guard(job, "priority")
    ops += [] if has_right else [r.create(right)]
    ops += [r.delete(p) for p in wrong]
    checker.plans.append((group, lambda: ops))


def check_refs(checker: Checker, job: _Job) -> None:
    refs = checker.refs_by_jid.get(job.id, [])
    for bid, p in refs:
        if bid != job.bid:
            checker.add(
                "stale-batch-ref",
                p,
                f"Batch {bid} references job {job.id}, which belongs to "
                f"{'batch ' + job.bid if job.bid else 'no batch'}.",
                f"delete {p}",
                lambda p=p: [*checker.job_guard(job, "bid"), r.delete(p)],
            )
    batch = checker.tree.batches.get(job.bid) if job.bid else None
    if batch is None or not batch.has_status:
        return
    assert job.bid is not None and job.status is not None  # a checked job's, read
    own = sorted(p for bid, p in refs if bid == job.bid)
    right = t.batch_job_ref(job.bid, job.status, job.id)
    wrong = [p for p in own if p != right]
    if right in own and not wrong:
        return
    group: list[Finding] = []
    home = batch_dir_for(job.status)
    if right not in own:
        group.append(
            checker.add(
                "missing-batch-ref",
                right,
                f"Job {job.id} is {job.status} but batch {job.bid} has no reference to it "
                f"under {home}, so the batch miscounts its jobs.",
                f"create {right}",
            )
        )
    for p in wrong:
        where = p.rsplit("/", 2)[1]
        group.append(
            checker.add(
                "wrong-batch-dir",
                p,
                f"Job {job.id} is {job.status}, so batch {job.bid} should reference it under "
                f"{home}, not under {where}.",
                f"delete {p}" + ("" if right in own else f" (after creating {right})"),
            )
        )
    checker.plans.append((group, lambda: _ref_ops(checker, job, right, right in own, wrong)))


def _ref_ops(
    checker: Checker, job: _Job, right: str, has_right: bool, wrong: list[str]
) -> list[Op]:
    assert job.bid is not None  # planned by ``check_refs`` for a job of a live batch
    ops = checker.job_guard(job, "bid") + [r.check(t.batch_node(job.bid, "status"), -1)]
    if not has_right:
        states = t.batch_states(job.bid)
        parent = right.rsplit("/", 1)[0]
        ops += [r.create(p) for p in (states, parent) if not r.exists(checker.reads, p)]
        ops.append(r.create(right))
    return ops + [r.delete(p) for p in wrong]


# --- stray entries -----------------------------------------------------


def check_stray_index(checker: Checker) -> None:
    for d, names in sorted(checker.tree.index.items()):
        for name in sorted(names):
            path = f"{t.JOB_STATES}/{d}/{name}"
            parsed = t.parse_index_name(name)
            if parsed is None:
                checker.add(
                    "foreign-index",
                    path,
                    f"{name!r} in the {d} queue is not a priority and job id "
                    "(NN-jidNNNNNNNNNN); workers skip it. The queue did not write it.",
                )
            elif not _live(checker, parsed[1]):
                stray(checker, "stale-index", path, parsed[1], f"Index entry {path}")


def check_stray_refs(checker: Checker) -> None:
    for batch in sorted(checker.live_batches(), key=lambda b: b.id):
        for d, names in sorted(batch.refs.items()):
            for name in sorted(names):
                path = f"{t.batch_job_dir(batch.id, d)}/{name}"
                if not t.is_job_id(name):
                    checker.add(
                        "stale-batch-ref",
                        path,
                        f"Batch {batch.id} has {name!r} under {d}, which is not a job id.",
                        f"delete {path}",
                        lambda path=path: [r.delete(path)],
                    )
                elif not _live(checker, name):
                    stray(
                        checker,
                        "stale-batch-ref",
                        path,
                        name,
                        f"Batch {batch.id}'s reference {path}",
                    )


def _live(checker: Checker, jid: str) -> bool:
    job = checker.tree.jobs.get(jid)
    return job is not None and job.has_status


def stray(checker: Checker, kind: str, path: str, jid: str, what: str) -> None:
    """An entry naming a job that does not exist (or is only half-created)."""
    shell = checker.tree.jobs.get(jid)
    if shell is not None and checker.age(shell.stat) < checker.grace:
        head = f"{what} names job {jid}, which has no status node yet"
        checker.add(kind, path, checker.young(head, checker.age(shell.stat)))
        return
    state = "which is only half-created" if shell else "which does not exist"
    checker.add(
        kind,
        path,
        f"{what} names job {jid}, {state}.",
        f"delete {path}",
        lambda: checker.absent_ops(t.job_node(jid, "status"), f"job {jid}", [r.delete(path)]),
    )
