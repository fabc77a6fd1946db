"""The consistency check's findings about Merritt's access queues (``/access/small|large``).

Merritt's access service takes work with ``Access.acquirePendingAssembly``, which loads
every request of its queue in name order and throws on the first one it cannot load: one
request whose status is missing or unreadable, or whose token is not JSON, stops the whole
queue. Those are reported first. The only repair is the one that starts no work and loses
none: such a request (past the grace period, so not one being created), and a Processing
request no session has held for longer than the lock age limit, is set Failed, as MerrittZK writes
a status, checked on the version read and recorded in its history, for a person to requeue
or delete. A token cannot be made up, and a lock or a child that is not ours is never
removed: those are only reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import access
from ..access import paths as p
from . import checker as c

if TYPE_CHECKING:
    from ..access import AccessItem
    from .checker import Checker


def check_access(checker: Checker) -> None:
    for parent, names in access.unknown_entries(checker.client).items():
        for name in names:
            checker.add(
                "access-unknown-entry",
                f"{parent}/{name}",
                "Not an access request MerrittZK makes (qid and 10 digits). Merritt's access "
                "service loads every child of its queue and stops at one it cannot load; "
                "find who wrote it.",
            )
    for item in access.read_queues(checker.client):
        check_item(checker, item)


def check_item(checker: Checker, item: AccessItem) -> None:
    label = f"Access request {item.key}"
    age = checker.now - item.created_ms / 1000
    status_problem = next((x for x in item.problems if x.startswith(("no status", "status"))), None)
    if status_problem:
        _to_failed(checker, item, "access-status-unreadable", f"{label}: {status_problem}", age)
    if "token is not JSON" in item.problems or "token is not a JSON object" in item.problems:
        checker.add(
            "access-token-unreadable",
            p.node(item.queue, item.qid, p.TOKEN),
            f"{label}'s token is not a JSON object: MerrittZK cannot load the request, and "
            "Merritt's access service stops its queue at it. Delete the request in Merritt.",
        )
    elif "no token node" in item.problems and age > checker.grace:
        checker.add(
            "access-token-missing",
            p.node(item.queue, item.qid, p.TOKEN),
            f"{label} has no token: the access service cannot tell what to assemble.",
        )
    if item.status == p.AccessStatus.PROCESSING and not item.locked:
        since = checker.now - item.status_mtime_ms / 1000
        head = (
            f"{label} has been Processing for {c._age(since)} and no session holds its lock: "
            "the access service that took it lost its session, and MerrittZK never takes a "
            "Processing request again"
        )
        if since <= checker.lock_max_age:
            # An assembly may run for long, and a service whose session expired may still
            # finish it: Failed would refuse its Completed (AccessState). Only past the age
            # at which any lock counts as stale is it taken for gone.
            checker.add(
                "access-processing-unlocked",
                p.node(item.queue, item.qid, p.STATUS),
                f"{head}; within the lock age limit ({c._age(checker.lock_max_age)}) it may "
                "still be finishing, so it is only reported. Check again later.",
            )
        else:
            _to_failed(checker, item, "access-processing-unlocked", head, since)
    if item.locked:
        lock_age = checker.now - item.lock_ctime_ms / 1000
        if lock_age > checker.lock_max_age:
            holder = f"ZooKeeper session {item.lock_owner:#x}" if item.lock_owner else "nobody"
            checker.add(
                "stale-lock",
                p.node(item.queue, item.qid, p.LOCK),
                f"{label}'s lock was taken {c._age(lock_age)} ago by {holder}, and the "
                f"request is {item.status or 'unreadable'}; only the access service can tell "
                "whether it is stuck.",
            )
    for name in item.unknown_children:
        checker.add(
            "access-unknown-child",
            f"{item.path}/{name}",
            f"{label} has a child MerrittZK does not make; it reads a request's nodes by "
            "name, so this is harmless to it, but someone wrote it.",
        )


def _to_failed(checker: Checker, item: AccessItem, kind: str, head: str, age: float) -> None:
    path = p.node(item.queue, item.qid, p.STATUS)
    if age <= checker.grace:
        checker.add(kind, path, checker.young(head, age))
        return
    reason = f"{head}. Repair: set it Failed, so a person can requeue or delete it."

    def plan() -> list:
        ops, _, _ = access.writes.status_ops(
            item, p.AccessStatus.FAILED, actor=checker.actor, reason=head, message=head
        )
        return ops

    checker.add(kind, path, reason, "set Failed", plan)
