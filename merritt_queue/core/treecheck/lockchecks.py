"""The consistency check's findings about locks: old ones, and storage locks nobody uses.

Functions of the checker (``checker.Checker``), as ``merrittchecks`` are: they read
what the check read and add findings to it. Only a persistent storage lock that no job is
storing is ever repaired (deleted, checked on the related jobs' status versions); an
ephemeral lock is only reported, with the session that holds it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from .. import parking
from .. import tree as t
from ..states import JobStatus
from ..treeread import Node, _json_field, read_pipelined
from . import checker as c
from . import treerepair as r

if TYPE_CHECKING:
    from ..treeread import _Job
    from .checker import Checker


def job_lock(checker: Checker, job: _Job, node: Node) -> None:
    path = t.job_node(job.id, "lock")
    if parking.is_parked(node[0], node[1].ephemeralOwner) and job.status in parking.PARKING_STATES:
        return  # a job of ours waiting for its step, kept from Merritt's consumers
    if job.status in c.FINISHED_JOB:
        checker.add(
            "lock-on-finished",
            path,
            f"Job {job.id} is {job.status} but is locked{_owner(node)}; a worker may "
            "have died between its last move and releasing the lock.",
        )
    item_lock(checker, path, node, f"Job {job.id}'s lock")


def item_lock(checker: Checker, path: str, node: Node, label: str) -> None:
    """A lock older than the limit; only a person can tell whether its holder is stuck."""
    age = checker.age(node[1])
    if age <= checker.lock_max_age:
        return
    if node[1].ephemeralOwner:
        reason = (
            f"{label} was taken {c._age(age)} ago{_owner(node)}; that session is alive, "
            "so removing the lock would let a second worker in. Find the worker."
        )
    else:
        reason = (
            f"{label} is persistent and {c._age(age)} old: no session end will ever release "
            "it, and the queue cannot tell whose it is."
        )
    checker.add("stale-lock", path, reason)


def _owner(node: Node) -> str:
    owner = node[1].ephemeralOwner
    return f" by ZooKeeper session {owner:#x}" if owner else " (persistent lock)"


def check_lock_dirs(checker: Checker) -> None:
    for path, node in sorted(checker.tree.locks.items()):
        age = checker.age(node[1])
        if age <= checker.lock_max_age:
            continue
        if path.startswith(t.LOCK_STORAGE + "/") and not node[1].ephemeralOwner:
            storage_lock(checker, path, node, age)
        else:
            kind, name = path.rsplit("/", 2)[1:]
            item_lock(checker, path, node, f"The {kind} lock {name}")


def jobs_by_ark_lock(checker: Checker) -> dict[str, list[_Job]]:
    """Live jobs by the storage lock name of their ark, read once, when first needed."""
    if checker._by_ark is None:
        jobs = [
            j for j in checker.tree.jobs.values() if j.has_status and "identifiers" in j.children
        ]
        got = read_pipelined(
            checker.client, [("get", t.job_node(j.id, "identifiers")) for j in jobs]
        )
        checker._by_ark = defaultdict(list)
        for job in jobs:
            ark = _json_field(got[("get", t.job_node(job.id, "identifiers"))], "primary_id")
            if ark:
                checker._by_ark[t.lock_name(ark)].append(job)
    return checker._by_ark


def storage_lock(checker: Checker, path: str, node: Node, age: float) -> None:
    name = path.rsplit("/", 1)[1]
    owner = node[0].decode(errors="replace")
    related = list(jobs_by_ark_lock(checker).get(name, []))
    job = checker.tree.jobs.get(owner)
    if job is not None and job.has_status and job not in related:
        related.append(job)
    storing = [j.id for j in related if j.status == JobStatus.STORING]
    head = f"Storage lock {name} was taken {c._age(age)} ago (owner {owner or 'unknown'})"
    if storing:
        checker.add("stale-lock", path, f"{head}; job {', '.join(storing)} is Storing this object.")
        return
    guards = [r.check(t.job_node(j.id, "status"), j.version("status")) for j in related]
    checker.add(
        "stale-lock",
        path,
        f"{head} and no job is storing this object, so it only blocks the next deposit.",
        f"delete {path}",
        lambda: [*guards, r.delete(path, node[1].version)],
    )
