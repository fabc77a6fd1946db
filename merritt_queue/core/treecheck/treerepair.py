"""Making the consistency check's repairs: each one ZooKeeper multi, all or nothing,
sent by the store's engine; the ops are the store's own (``records.Op``)."""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from ..records import Op, OpKind
from ..store.engine import Engine, refused
from ..store.reads import Reads

__all__ = ["Op", "RepairFailed", "check", "commit", "create", "delete", "set_data"]


class RepairFailed(Exception):
    """A repair was not made; the message says why, for the finding's reason."""


def create(path: str, data: bytes = b"") -> Op:
    return Op(OpKind.CREATE, path, data)


def delete(path: str, version: int = -1) -> Op:
    return Op(OpKind.DELETE, path, version=version)


def set_data(path: str, data: bytes, version: int = -1) -> Op:
    return Op(OpKind.SET, path, data, version=version)


def check(path: str, version: int) -> Op:
    return Op(OpKind.CHECK, path, version=version)


def commit(engine: Engine, ops: list[Op]) -> None:
    """Run ``ops`` as one multi; raise RepairFailed naming the op ZooKeeper refused.

    Unlike the store's ``commit``, nothing is mended: the check read the tree, and a
    tree that moved since is left for the next run.
    """
    if not ops:
        raise RepairFailed("nothing left to do; run the check again")
    failed = refused(engine.multi(ops))
    if failed is not None:
        i, err = failed
        raise RepairFailed(_explain(ops[i].kind, ops[i].path, err))


def _explain(kind: str, path: str, err: Exception) -> str:
    if isinstance(err, BadVersionError):
        return f"{path} changed since the check read it; nothing was written, run the check again"
    if isinstance(err, NoNodeError):
        return f"{path} (or its parent) no longer exists; nothing was written"
    if isinstance(err, NodeExistsError):
        return f"{path} already exists; nothing was written"
    if isinstance(err, NotEmptyError):
        return f"{path} gained children since it was read; nothing was written"
    return f"ZooKeeper refused {kind} {path}: {err!r}; nothing was written"


def exists(reads: Reads, path: str) -> bool:
    return reads.exists(path) is not None
