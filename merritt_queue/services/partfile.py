"""A download's file on disk: written beside its destination, digested on the way.

Guarantees: bytes go to ``part_path(dest)`` and reach ``dest`` only by one rename once the
caller has checked them, and only if the part file is still the one written (else
``PartFileGone``, retryable); the file is fsynced before that (``Sink.close``); memory stays
bounded (``Sink`` keeps at most a few chunks); a full disk is a retryable ``FetchError``
naming the file, any other write error a final one, whichever thread meets it.
"""

from __future__ import annotations

import errno
import os
import queue
import threading
from pathlib import Path

from ..deposit.digest import Hashers
from ..deposit.fsnames import PART_SUFFIX
from .errors import FetchError, PartFileGone

# While a download grows, its file is written back to the disk every this many bytes.
FLUSH_EVERY = 32 << 20


def part_path(dest: Path) -> Path:
    """Where ``dest`` is written before it is complete."""
    return dest.with_suffix(dest.suffix + PART_SUFFIX)


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


def rename_into_place(part: Path, dest: Path, written: tuple[int, int] | None = None) -> None:
    """Rename ``part`` onto ``dest``; ``written``: the (device, inode) the bytes went to,
    which ``part`` must still be."""
    try:
        if written is not None and _identity(os.stat(part)) != written:
            raise PartFileGone(
                f"{part.name} was replaced by another file while it was downloaded; "
                "nothing was kept, it is downloaded again later"
            )
        os.replace(part, dest)
    except FileNotFoundError:
        raise PartFileGone(
            f"{part.name} vanished before it was complete (another process removed it); "
            "nothing was kept, it is downloaded again later"
        ) from None
    except OSError as exc:
        raise disk_error(dest, exc) from exc


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


def written_identity(out) -> tuple[int, int]:
    """The (device, inode) of the open file ``out``, for ``rename_into_place``."""
    return _identity(os.fstat(out.fileno()))


def open_for_writing(path: Path):
    try:
        return open(path, "wb")
    except OSError as exc:
        raise disk_error(path, exc) from exc


def write(out, chunk: bytes | memoryview, path: Path) -> None:
    try:
        out.write(chunk)
    except OSError as exc:
        raise disk_error(path, exc) from exc


class Sink:
    """Writes the body in the caller's thread, digests it on a helper thread, and makes it
    durable.

    Digesting is the slowest part of a download (md5 runs at a fraction of what a local
    disk or network gives), so it gets a thread, and so a core, of its own: the caller
    reads the socket into a buffer (``buffer``), writes it and hands it over (``put``).
    hashlib releases the GIL on large buffers, as socket reads and file writes do, so the
    two threads run at once. The buffers are ``depth`` bytearrays of ``chunk_size`` bytes,
    used over and over: memory stays bounded, and no chunk costs an allocation and fresh
    pages (which showed in side-by-side runs of ``bench download``).

    ``close`` fsyncs the file: once renamed, a verified download must survive a crash, since
    the next step reads it instead of downloading it again. So that this costs little at
    the end, a second helper thread writes the file back to the disk while it grows
    (``fdatasync`` every ``flush_every`` bytes): the disk works during the download and the
    last fsync has only the tail left.

    An error of either helper (a digest that fails, a disk that fills) is raised in the
    caller's thread by its next ``put`` or by ``close``, the same error object; ``close``
    and ``abandon`` end both helpers before they return.

    ``digest_here``: the body is known to fit one buffer, so no reading is left to overlap
    its digest with; it is digested in the caller's thread, sparing a thread's start that
    costs more than a small file's digest.
    """

    def __init__(
        self,
        out,
        path: Path,
        hasher: Hashers | None,
        chunk_size: int,
        depth: int = 8,
        flush_every: int | None = None,
        digest_here: bool = False,
    ) -> None:
        self._out, self._path, self._hasher = out, path, hasher
        self._digest_here = digest_here
        self._fd = out.fileno()
        self._flush_every = FLUSH_EVERY if flush_every is None else flush_every
        self._chunk_size, self._depth, self._made = chunk_size, depth, 0
        self._free: queue.SimpleQueue[memoryview] = queue.SimpleQueue()
        self._queue: queue.SimpleQueue[tuple[memoryview, int] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._written = 0
        self._flushed = 0  # bytes written when the flusher was last woken
        self._wake = threading.Event()
        self._stopping = False
        self._abandoned = False
        self._digester: threading.Thread | None = None
        self._flusher: threading.Thread | None = None

    def buffer(self) -> memoryview:
        """A free buffer to read into; waits while all ``depth`` of them await their digest."""
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        if self._made < self._depth:
            self._made += 1
            return memoryview(bytearray(self._chunk_size))
        return self._free.get()  # the digest thread gives every buffer back, even failing

    def put(self, buffer: memoryview, length: int) -> None:
        """Write the first ``length`` bytes of ``buffer`` and have them digested."""
        self._raise_error()
        write(self._out, buffer[:length], self._path)
        self._written += length
        if self._hasher is None:
            self._free.put(buffer)
        elif self._digest_here:
            self._hasher.update(buffer[:length])
            self._free.put(buffer)
        else:
            if self._digester is None:
                self._digester = self._start(self._digest, "fetch-digest")
            self._queue.put((buffer, length))
        if self._written - self._flushed >= self._flush_every:
            self._flushed = self._written
            if self._flusher is None:
                self._flusher = self._start(self._flush, "fetch-flush")
            self._wake.set()

    def close(self) -> None:
        """Wait for the digest, then fsync; the first error of any thread is raised here."""
        self._stop()
        self._raise_error()
        try:
            self._out.flush()
            os.fsync(self._out.fileno())
        except OSError as exc:
            raise disk_error(self._path, exc) from exc

    def abandon(self) -> None:
        """End the helpers and forget their errors: the caller is failing already."""
        self._abandoned = True
        self._stop()

    # -- the helpers ------------------------------------------------------------------------

    def _start(self, target, name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    def _digest(self) -> None:
        assert self._hasher is not None
        while (item := self._queue.get()) is not None:
            buffer, length = item
            if self._error is None and not self._abandoned:
                try:
                    self._hasher.update(buffer[:length])
                except BaseException as exc:  # handed to the caller's thread
                    self._fail(exc)
            self._free.put(buffer)

    def _flush(self) -> None:
        fd = self._fd
        synced = 0
        while True:
            self._wake.wait()
            self._wake.clear()
            # A write-back asked for before the stop is still made (its error is the
            # download's), so what reaches close() does not depend on which thread ran first.
            wanted = self._flushed
            if wanted > synced and not self._abandoned:
                try:
                    # fdatasync where the system has one: the size is fsynced at the end anyway.
                    getattr(os, "fdatasync", os.fsync)(fd)
                except OSError as exc:
                    self._fail(disk_error(self._path, exc))
                    return
                synced = wanted
            if self._stopping:
                return

    def _stop(self) -> None:
        if self._digester is not None:
            self._queue.put(None)
            self._digester.join()
            self._digester = None
        if self._flusher is not None:
            self._stopping = True
            self._wake.set()
            self._flusher.join()
            self._flusher = None

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = exc

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error
