"""Making the consistency check's repairs: each one ZooKeeper multi, all or nothing."""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)

Op = tuple[str, str, Any]  # (create | delete | check | set, path, data, version or both)


class RepairFailed(Exception):
    """A repair was not made; the message says why, for the finding's reason."""


def _commit(client: KazooClient, ops: list[Op]) -> None:
    """Run ``ops`` as one multi; raise RepairFailed naming the op ZooKeeper refused."""
    if not ops:
        raise RepairFailed("nothing left to do; run the check again")
    tx = client.transaction()
    for kind, path, arg in ops:
        if kind == "create":
            tx.create(path, arg)
        elif kind == "delete":
            tx.delete(path, version=arg)
        elif kind == "set":
            tx.set_data(path, arg[0], version=arg[1])
        else:
            tx.check(path, arg)
    for (kind, path, _), result in zip(ops, tx.commit(), strict=False):
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            raise RepairFailed(_explain(kind, path, result))


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


def _exists(client: KazooClient, path: str) -> bool:
    return client.exists(path) is not None
