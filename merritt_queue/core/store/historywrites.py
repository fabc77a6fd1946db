"""The store's side of the ``history`` node: the entry every status write adds to its multi.

Guarantee: each status write appends one entry for the status version it makes, in the
same multi, so the history is never ahead of or behind the status (see ``history``). A
record that was read whole carries its history; one that was not (a partial record of
``job_heads``, or one built elsewhere) has its history node read first, after its status
was read.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import history as h
from .. import tree as t
from ..records import Op, OpKind
from .shared import Shared


def decode_node(node: tuple[bytes, object] | None) -> h.History:
    """The history in a node as ``get`` returned it (None: the node is missing)."""
    return h.decode(node[0] if node is not None else None, node is not None)


class History:
    """History reads and the appends that ride with each status write."""

    def __init__(self, shared: Shared):
        self.reads = shared.reads
        self.changes = shared.changes

    def read(self, paths: Iterable[str]) -> dict[str, h.History]:
        """The history nodes at ``paths``, in one pipelined round."""
        paths = list(paths)
        if not paths:
            return {}
        return {path: decode_node(node) for path, node in self.reads.get_many(paths).items()}

    def of(self, path: str, known: h.History | None) -> h.History:
        return known if known is not None else self.read([path])[path]

    def _op(
        self, path: str, old: h.History, version: int, from_status: str, record: dict
    ) -> tuple[Op, h.History]:
        """The op appending the entry of status ``version`` (``record`` as written), and the
        history it leaves. No version check of its own: the status write beside it has one."""
        entry = h.Entry(
            version=version,
            from_status=from_status or "",
            to_status=record["status"],
            at=record.get("last_modified") or "",
            message=record.get("message") or "",
            retry_count=int(record.get("retry_count") or 0),
            by=self.changes.actor,
        )
        new, data = h.append(old, entry)
        return (Op(OpKind.SET, path, data) if old.exists else Op(OpKind.CREATE, path, data)), new

    def job_op(
        self, jid: str, old: h.History, version: int, frm: str, record: dict
    ) -> tuple[Op, h.History]:
        return self._op(t.job_node(jid, h.NODE), old, version, frm, record)

    def batch_op(
        self, bid: str, old: h.History, version: int, frm: str, record: dict
    ) -> tuple[Op, h.History]:
        return self._op(t.batch_node(bid, h.NODE), old, version, frm, record)
