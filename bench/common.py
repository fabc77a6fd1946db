"""Helpers shared by every benchmark part: output, figures, timing, a ZooKeeper store.

Each part prints JSON lines (``emit``) while it runs and exactly one summary
line ``bench <part> key=value ...`` at the end (``summary``), whose figures are
also written to ``var/bench/<part>.json`` at the repository root.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from merritt_queue.store import QueueStore

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "var" / "bench"


def emit(part: str, **fields) -> None:
    """Print one JSON line ``{"part": part, ...fields}`` and flush it."""
    print(json.dumps({"part": part, **fields}, default=str), flush=True)


def _format(value: int | float) -> str:
    return str(value) if isinstance(value, int) else f"{value:.3f}"


def summary(part: str, **numbers: int | float) -> None:
    """Print ``bench <part> key=value ...`` and write the figures to ``var/bench/<part>.json``."""
    for key, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"bench {part}: summary figure {key}={value!r} is not a number")
    line = " ".join([f"bench {part}", *(f"{k}={_format(v)}" for k, v in numbers.items())])
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{part}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"part": part, **numbers}, indent=2) + "\n")
    tmp.replace(path)
    print(line, flush=True)


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) of ``values``, interpolating linearly between ranks."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be from 0 to 100, not {p}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class Timer:
    """Wall-clock seconds since the ``timer()`` block started, final once it has ended."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.end: float | None = None

    @property
    def elapsed(self) -> float:
        return (self.end if self.end is not None else time.perf_counter()) - self.start


@contextmanager
def timer() -> Iterator[Timer]:
    """``with timer() as t: ...`` then ``t.elapsed`` (``time.perf_counter`` seconds)."""
    t = Timer()
    try:
        yield t
    finally:
        t.end = time.perf_counter()


def env_int(part: str, name: str, default: int) -> int:
    """The whole number in environment variable ``name`` (at least 1), or ``default`` if unset."""
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SystemExit(f"bench {part}: {name}={text!r} is not a whole number") from None
    if value < 1:
        raise SystemExit(f"bench {part}: {name} must be at least 1, not {value}")
    return value


def zk_hosts() -> str:
    hosts = os.environ.get("ZK_HOSTS")
    if not hosts:
        raise SystemExit(
            "bench: ZK_HOSTS is not set; run `scripts/services.sh with-test-services "
            "python -m bench`, or export ZK_HOSTS=host:port of a throw-away ZooKeeper"
        )
    return hosts


def zk_store(prefix: str) -> tuple[QueueStore, Callable[[], None]]:
    """A ``QueueStore`` on a fresh chroot ``/mq-bench-<prefix>-<uuid>`` and its cleanup.

    Returns ``(store, cleanup)``; ``cleanup()`` stops the store's client and
    deletes the whole chroot with a client on the root. Call it in a ``finally``.
    """
    from merritt_queue.store import QueueStore
    from merritt_queue.zk import ZkConfig, connect

    hosts = zk_hosts()
    chroot = f"/mq-bench-{prefix}-{uuid.uuid4().hex}"
    client = connect(ZkConfig(hosts=hosts, chroot=chroot))
    store = QueueStore(client)

    def cleanup() -> None:
        try:
            client.stop()
            client.close()
        except Exception as e:  # a dead client must not keep the chroot from going
            print(f"bench: closing the {prefix} client failed: {e!r}", file=sys.stderr)
        root = connect(ZkConfig(hosts=hosts))
        try:
            delete_tree(root, chroot)
        finally:
            root.stop()
            root.close()

    return store, cleanup


def delete_tree(client, root: str) -> None:
    """Delete ``root`` and everything under it, pipelining each level (fast for big trees)."""
    from kazoo.exceptions import NoNodeError, NotEmptyError

    levels: list[list[str]] = []
    level = [root]
    while level:
        levels.append(level)
        pending = [(p, client.get_children_async(p)) for p in level]
        level = []
        for path, result in pending:
            try:
                level += [f"{path.rstrip('/')}/{c}" for c in result.get()]
            except NoNodeError:  # removed meanwhile (an ephemeral whose session ended)
                pass
    for level in reversed(levels):
        _ignore((NoNodeError, NotEmptyError), [client.delete_async(p) for p in level])
    # A node created while we walked leaves its parent non-empty: fall back to kazoo's walk.
    try:
        client.delete(root, recursive=True)
    except (NoNodeError, NotEmptyError):
        pass


def _ignore(errors: tuple[type[Exception], ...], results: list) -> None:
    for result in results:
        try:
            result.get()
        except errors:
            pass
