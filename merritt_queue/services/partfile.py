"""A download's file on disk: written beside its destination, digested on the way.

Guarantees: bytes go to ``part_path(dest)`` and reach ``dest`` only by one rename once the
caller has checked them; memory stays bounded (``Sink`` keeps at most a few chunks); a full
disk is a retryable ``FetchError`` naming the file, any other write error a final one.
"""

from __future__ import annotations

import errno
import os
import queue
import threading
from pathlib import Path

from ..deposit.digest import Hashers
from .errors import FetchError


def part_path(dest: Path) -> Path:
    """Where ``dest`` is written before it is complete."""
    return dest.with_suffix(dest.suffix + ".part")


def unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def disk_error(path: Path, exc: OSError) -> FetchError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return FetchError(f"working disk full while writing {path}", retryable=True)
    return FetchError(f"cannot write {path}: {exc.strerror or exc}")


def make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise disk_error(path, exc) from exc


def rename_into_place(part: Path, dest: Path) -> None:
    try:
        os.replace(part, dest)
    except OSError as exc:
        raise disk_error(dest, exc) from exc


def open_for_writing(path: Path):
    try:
        return open(path, "wb")
    except OSError as exc:
        raise disk_error(path, exc) from exc


def write(out, chunk: bytes, path: Path) -> None:
    try:
        out.write(chunk)
    except OSError as exc:
        raise disk_error(path, exc) from exc


class Sink:
    """Digests and writes the body on a helper thread while the caller reads the socket.

    hashlib and file writes release the GIL on large buffers, so reading, hashing and
    writing overlap; the bounded queue keeps at most ``depth`` chunks in memory. No
    fsync: a download lost in a crash is simply downloaded again by the re-run step.
    """

    def __init__(self, out, path: Path, hasher: Hashers, depth: int = 4) -> None:
        self._out, self._path, self._hasher = out, path, hasher
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fetch-sink", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._hasher.update(chunk)
                    write(self._out, chunk, self._path)
                except BaseException as exc:  # handed to the reading thread
                    self._error = exc

    def put(self, chunk: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(chunk)

    def close(self) -> None:
        """Wait for everything to be written; the writer's error, if any, is raised here."""
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
        try:
            self._out.flush()
        except OSError as exc:
            raise disk_error(self._path, exc) from exc

    def abandon(self) -> None:
        self._queue.put(None)
        self._thread.join()
