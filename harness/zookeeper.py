"""A run's own part of a ZooKeeper: a fresh chroot, removed whole afterwards, and the
server's four-letter words."""

from __future__ import annotations

import sys
import uuid

from kazoo.exceptions import NoNodeError, NotEmptyError

from merritt_queue.core import zkstats
from merritt_queue.core.zk import ZkConfig, connect


def fresh_chroot(prefix: str) -> str:
    """``/<prefix>-<uuid>``: nobody else's tree is under it."""
    return f"/{prefix}-{uuid.uuid4().hex}"


def delete_chroot(hosts: str, chroot: str, label: str = "harness") -> None:
    """Remove ``chroot`` with a client on the root; a server gone already only says so."""
    try:
        root = connect(ZkConfig(hosts=hosts))
    except Exception as e:  # the run's own error matters more than the leftover chroot
        print(f"{label}: could not remove {chroot}: {e!r}", file=sys.stderr)
        return
    try:
        delete_tree(root, chroot)
    finally:
        root.stop()
        root.close()


def delete_tree(client, root: str) -> None:
    """Delete ``root`` and everything under it, pipelining each level (fast for big trees)."""
    levels: list[list[str]] = []
    level = [root]
    while level:
        levels.append(level)
        following: list[str] = []
        for chunk in _chunks(level):
            pending = [(p, client.get_children_async(p)) for p in chunk]
            for path, result in pending:
                try:
                    following += [f"{path.rstrip('/')}/{c}" for c in result.get()]
                except NoNodeError:  # removed meanwhile (an ephemeral whose session ended)
                    pass
        level = following
    for level in reversed(levels):
        for chunk in _chunks(level):
            _ignore((NoNodeError, NotEmptyError), [client.delete_async(p) for p in chunk])
    # A node created while we walked leaves its parent non-empty: fall back to kazoo's walk.
    try:
        client.delete(root, recursive=True)
    except (NoNodeError, NotEmptyError):
        pass


# Requests in flight at once: a tree of a million nodes sent whole starves the session's pings.
IN_FLIGHT = 5000


def _chunks(paths: list[str]) -> list[list[str]]:
    return [paths[i : i + IN_FLIGHT] for i in range(0, len(paths), IN_FLIGHT)]


def _ignore(errors: tuple[type[Exception], ...], results: list) -> None:
    for result in results:
        try:
            result.get()
        except errors:
            pass


def four_letter(hosts: str, word: str, timeout: float = 5) -> str:
    """The answer of the first server in ``hosts`` to a four-letter word (``srvr``, ``mntr``);
    ``OSError`` when it does not answer."""
    return zkstats.four_letter(hosts.split(",")[0].split("/")[0], word, timeout)
