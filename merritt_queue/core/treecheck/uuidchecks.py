"""The consistency check's findings about ``/batch-uuids``: entries naming no batch or a batch
of another batchID, and batches whose batchID has no entry (a resubmission would then not be
recognised as a duplicate).

Functions of the checker (``checker.Checker``), as ``lockchecks`` are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import tree as t
from ..errors import InvalidData
from . import treerepair as r
from .treerepair import Op

if TYPE_CHECKING:
    from ..treeread import Node, _Batch
    from .checker import Checker


def check_uuids(checker: Checker) -> None:
    for uuid, node in sorted(checker.tree.uuids.items()):
        check_uuid(checker, uuid, node)
    for batch in sorted(checker.live_batches(), key=lambda b: b.id):
        if batch.uuid and not batch.problem:
            missing_uuid(checker, batch)


def check_uuid(checker: Checker, uuid: str, node: Node) -> None:
    path = f"{t.BATCH_UUIDS}/{uuid}"
    bid = node[0].decode(errors="replace")
    batch = checker.tree.batches.get(bid)
    removal = r.delete(path, node[1].version)
    if batch is None:
        checker.add(
            "dangling-uuid",
            path,
            f"batchID {uuid} points at batch {bid or '(empty)'}, which does not exist.",
            f"delete {path}",
            lambda: checker.absent_ops(
                t.batch_path(bid) if bid else None, f"batch {bid}", [removal]
            ),
        )
    elif batch.has_status and not batch.submission_problem and batch.uuid != uuid:
        checker.add(
            "dangling-uuid",
            path,
            f"batchID {uuid} points at batch {bid}, whose submission has batchID "
            f"{batch.uuid or '(none)'}.",
            f"delete {path}",
            lambda: [_submission_guard(batch), removal],
        )


def _submission_guard(batch: _Batch) -> Op:
    name = "submission" if batch.node("submission") else "status"
    return r.check(t.batch_node(batch.id, name), batch.version(name))


def missing_uuid(checker: Checker, batch: _Batch) -> None:
    uuid, bid = batch.uuid, batch.id
    assert uuid is not None  # ``check_uuids`` asks only for batches with a batchID
    try:
        path = t.batch_uuid_path(uuid)
    except InvalidData as e:
        checker.add("missing-uuid", t.batch_path(bid), f"Batch {bid}: {e}; it has no uuid entry.")
        return
    node = checker.tree.uuids.get(uuid)
    owner = node[0].decode(errors="replace") if node else None
    if owner == bid:
        return
    other = checker.tree.batches.get(owner) if owner else None
    if other is not None and other.has_status and other.uuid == uuid:
        checker.add(
            "missing-uuid",
            t.batch_path(bid),
            f"Batch {bid} has batchID {uuid}, but so does batch {owner}, which the uuid entry "
            "names: two batches share one batchID.",
        )
        return
    after = " once the dangling entry is removed" if node else ""
    checker.add(
        "missing-uuid",
        t.batch_path(bid),
        f"Batch {bid} has batchID {uuid} but {path} does not name it, so a resubmission "
        "would not be recognised as a duplicate.",
        f"create {path} -> {bid}{after}",
        lambda: [_submission_guard(batch), r.create(path, t.encode_str(bid))],
    )
