"""Unpacking deposited containers (zip, tar, tar.gz) without trusting them.

Guarantees of ``unpack``:
- all or nothing: the archive is unpacked into a fresh directory next to ``dest`` and moved
  into place only once every entry has been extracted and checked; after a refusal nothing
  from the archive is in ``dest`` and the temporary directory is gone;
- nothing lands outside ``dest``: absolute names, drive letters and ``..`` segments are
  refused (backslashes count as separators, as the Windows tools that write them mean
  them); links, devices, fifos and sockets are refused, never created;
- bounded: at most ``max_files`` entries and ``max_total_bytes`` unpacked bytes; no zip
  entry and no archive as a whole may expand more than ``max_ratio`` times (sizes up to
  1 MiB are exempt: their ratios mean nothing). Declared sizes are checked before a byte
  is written, and actual bytes are counted while writing, because a zip may lie: an entry
  holding more or fewer bytes than it declares is refused. Memory stays bounded: data is
  copied in 1 MiB chunks, tar headers over 16 MiB are refused, and only stored and
  deflated zip entries are accepted (bzip2/lzma decompress without an output bound);
- every name fits the file system: at most ``max_depth`` levels, ``max_path_bytes`` bytes
  in all and ``NAME_MAX`` bytes per segment, checked on the listing before the entry (for
  a zip, before any entry) is written, so a deep archive is refused by its rule instead of
  failing later on the kernel's "file name too long";
- corrupt archives (bad headers, CRC mismatches, truncated data, a damaged tar header
  that would silently end the listing early) are refused, never partially accepted; so
  are duplicate names, a file used as a directory, encrypted entries and archives that
  hold no file;
- every refusal is a ContainerError whose message starts with the archive's file name.
"""

from __future__ import annotations

import copy
import gzip
import os
import re
import shutil
import stat
import tarfile
import tempfile
import unicodedata
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .fsnames import NAME_MAX
from .manifest import container_type

CHUNK = 1024 * 1024
MAX_TOTAL_BYTES = 10 * 1024**3
MAX_FILES = 10_000
MAX_RATIO = 200
RATIO_MIN_BYTES = 1024 * 1024
MAX_HEADER_READ = 16 * 1024 * 1024
MAX_DEPTH = 32
MAX_PATH_BYTES = 1024
KINDS = ("zip", "tar", "tar.gz")
_CORRUPT = (
    zipfile.BadZipFile,
    tarfile.TarError,
    zlib.error,
    EOFError,
    gzip.BadGzipFile,
    UnicodeDecodeError,
)
_DRIVE = re.compile(r"[A-Za-z]:")
_SPECIAL = {
    stat.S_IFLNK: "symbolic link",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFIFO: "fifo",
    stat.S_IFSOCK: "socket",
}


@dataclass(frozen=True)
class UnpackedFile:
    path: Path
    name: str
    size: int


class ContainerError(ValueError):
    """The archive is refused; the message says why and names the archive."""


def detect_kind(archive: Path) -> str | None:
    """``zip``, ``tar`` or ``tar.gz``: by the file name, else by the first bytes."""
    return container_type(archive.name) or _kind_by_magic(archive)


def _kind_by_magic(archive: Path) -> str | None:
    with open(archive, "rb") as f:
        head = f.read(512)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(b"\x1f\x8b"):
        return "tar.gz"
    return "tar" if head[257:262] == b"ustar" else None


def unpack(
    archive: Path,
    dest: Path,
    *,
    kind: str | None = None,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_files: int = MAX_FILES,
    max_ratio: float = MAX_RATIO,
    max_depth: int = MAX_DEPTH,
    max_path_bytes: int = MAX_PATH_BYTES,
) -> list[UnpackedFile]:
    """Unpack ``archive`` into ``dest`` (created if missing); the files, in archive order."""
    archive, dest = Path(archive), Path(dest)
    kind = _kind(archive, kind)
    budget = _budget(archive, max_total_bytes, max_files, max_ratio, max_depth, max_path_bytes)
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.unpack-", dir=dest.parent))
    try:
        if kind == "zip":
            files = _unpack_zip(archive, work, budget)
        else:
            files = _unpack_tar(archive, work, budget, gz=kind == "tar.gz")
        _move_into_place(archive.name, work, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return [UnpackedFile(dest / name, name, n) for name, n in files]


def unpacked_size(
    archive: Path,
    *,
    kind: str | None = None,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_files: int = MAX_FILES,
    max_ratio: float = MAX_RATIO,
    max_depth: int = MAX_DEPTH,
    max_path_bytes: int = MAX_PATH_BYTES,
) -> int:
    """The bytes ``archive`` declares it unpacks to, read from its listing without writing
    anything: the zip central directory, the tar member headers (a tar.gz is decompressed
    to read them). A listing that ``unpack`` would refuse, under the same limits, raises
    the same ContainerError."""
    archive = Path(archive)
    kind = _kind(archive, kind)
    budget = _budget(archive, max_total_bytes, max_files, max_ratio, max_depth, max_path_bytes)
    if kind == "zip":
        try:
            with zipfile.ZipFile(archive) as zf:
                _plan_zip(zf.infolist(), budget)
        except _CORRUPT as e:
            raise ContainerError(f"{budget.label}: corrupt zip archive ({e})") from e
        return budget.declared
    with open(archive, "rb") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if kind == "tar.gz" else raw
        try:
            # typeshed's tarfile wants a writable, closable file; reading needs neither.
            with tarfile.open(fileobj=_Reader(stream, budget), mode="r:") as tf:  # type: ignore[call-overload]
                for member, _name in _members(tf, budget):
                    if member.isreg():
                        budget.declare(member.name, member.size)
        except _CORRUPT as e:
            raise ContainerError(f"{budget.label}: corrupt {kind} archive ({e})") from e
    return budget.declared


def unpacked_bound(archive_size: int, max_total_bytes: int = MAX_TOTAL_BYTES) -> int:
    """The most an archive of ``archive_size`` bytes may unpack to before ``unpack`` refuses
    it (the expansion ratio and total limits): known without reading the archive."""
    return min(max_total_bytes, max(archive_size * MAX_RATIO, RATIO_MIN_BYTES))


def _budget(archive: Path, *limits) -> _Budget:
    return _Budget(archive.name, archive.stat().st_size, *limits)


def _kind(archive: Path, kind: str | None) -> str:
    kind = kind or detect_kind(archive)
    if kind not in KINDS:
        raise ContainerError(f"{archive.name}: not a zip, tar or tar.gz archive")
    return kind


# --- limits ------------------------------------------------------------------------------


class _Budget:
    """The limits of one archive, and how much of them its entries have used."""

    def __init__(
        self,
        label: str,
        archive_size: int,
        max_total: int,
        max_files: int,
        ratio,
        max_depth: int = MAX_DEPTH,
        max_path_bytes: int = MAX_PATH_BYTES,
    ):
        self.label, self.archive_size = label, archive_size
        self.max_total, self.max_files, self.max_ratio = max_total, max_files, ratio
        self.max_depth, self.max_path_bytes = max_depth, max_path_bytes
        self.entries = self.declared = self.written = 0

    def count_entry(self) -> None:
        self.entries += 1
        if self.entries > self.max_files:
            raise ContainerError(f"{self.label}: more than {self.max_files} entries (the limit)")

    def declare(self, raw: str, size: int, compressed: int | None = None) -> None:
        self.declared += size
        self._check_total(self.declared)
        if compressed is not None:
            self._check_ratio(size, compressed, f"entry {raw!r} expands")
        self._check_ratio(self.declared, self.archive_size, "the archive expands")

    def spend(self, n: int) -> None:
        self.written += n
        self._check_total(self.written)
        self._check_ratio(self.written, self.archive_size, "the archive expands")

    def stream_at(self, position: int) -> None:
        """A tar stream read up to ``position``: headers and padding cost CPU too."""
        limit = 2 * self.max_total + CHUNK
        if position > limit:
            raise ContainerError(f"{self.label}: the tar stream runs past {limit} bytes")
        self._check_ratio(position, self.archive_size, "the archive expands")

    def _check_total(self, total: int) -> None:
        if total > self.max_total:
            raise ContainerError(
                f"{self.label}: unpacks to more than {self.max_total} bytes (the limit)"
            )

    def _check_ratio(self, size: int, compressed: int, what: str) -> None:
        ratio = size / max(compressed, 1)
        if size > RATIO_MIN_BYTES and ratio > self.max_ratio:
            raise ContainerError(
                f"{self.label}: {what} {ratio:.0f} times (the limit is {self.max_ratio}); "
                "refused as a possible decompression bomb"
            )


# --- entry names -------------------------------------------------------------------------


def _entry_name(label: str, raw: str, is_dir: bool) -> str:
    """The safe relative POSIX name of an entry ("" for the archive's root directory)."""
    name = raw.replace("\\", "/")
    if name.startswith("/") or _DRIVE.match(name) or ".." in name.split("/"):
        raise ContainerError(f"{label}: entry {raw!r} would escape the working directory")
    _check_characters(label, raw)
    name = "/".join(part for part in name.split("/") if part not in ("", "."))
    if not name and not is_dir:
        raise ContainerError(f"{label}: entry {raw!r} has no file name")
    return name


def _check_length(budget: _Budget, raw: str, name: str) -> None:
    """Refuse a name the file system (or the paths built on it later) could not hold."""
    label, parts = budget.label, name.split("/")
    if len(parts) > budget.max_depth:
        raise ContainerError(
            f"{label}: entry {_shown(raw)} is {len(parts)} levels deep "
            f"(the limit is {budget.max_depth}, MQ_CONTAINER_MAX_DEPTH)"
        )
    if len(name.encode("utf-8")) > budget.max_path_bytes:
        raise ContainerError(
            f"{label}: entry {_shown(raw)} has a path over {budget.max_path_bytes} bytes "
            "(the limit, MQ_CONTAINER_MAX_PATH_BYTES)"
        )
    long = next((p for p in parts if len(p.encode("utf-8")) > NAME_MAX), None)
    if long is not None:
        raise ContainerError(
            f"{label}: entry {_shown(raw)} has a name segment over {NAME_MAX} bytes "
            "(the file system's limit)"
        )


def _shown(raw: str) -> str:
    """A name as a message quotes it: a deep archive's names run to kilobytes."""
    return repr(raw) if len(raw) <= 120 else f"{raw[:120]!r}..."


def _check_characters(label: str, raw: str) -> None:
    if any(unicodedata.category(ch) == "Cc" for ch in raw):
        raise ContainerError(f"{label}: entry {raw!r} has control characters in its name")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:  # tarfile keeps undecodable bytes as surrogates
        raise ContainerError(f"{label}: entry {raw!r} has a name that is not UTF-8") from None


class _Tree:
    """The names seen so far: refuses duplicates and a file used as a directory."""

    def __init__(self, label: str):
        self.label = label
        self.files: set[str] = set()
        self.dirs: set[str] = set()

    def add(self, raw: str, name: str, is_dir: bool) -> None:
        if not name:
            return  # the root directory itself
        self._check_clash(raw, name, is_dir)
        parents = _parents(name)
        clash = next((p for p in parents if p in self.files), None)
        if clash:
            raise ContainerError(f"{self.label}: entry {raw!r} is inside {clash!r}, a file")
        self.dirs.update(parents)
        (self.dirs if is_dir else self.files).add(name)

    def _check_clash(self, raw: str, name: str, is_dir: bool) -> None:
        if name in self.files:
            raise ContainerError(f"{self.label}: entry {name!r} appears more than once")
        if not is_dir and name in self.dirs:
            raise ContainerError(f"{self.label}: entry {raw!r} is a file and a directory")


def _parents(name: str) -> list[str]:
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


# --- zip ---------------------------------------------------------------------------------


def _unpack_zip(archive: Path, work: Path, budget: _Budget) -> list[tuple[str, int]]:
    try:
        with zipfile.ZipFile(archive) as zf:
            plan = _plan_zip(zf.infolist(), budget)
            return [_extract_zip_entry(zf, info, name, work, budget) for info, name in plan]
    except _CORRUPT as e:
        raise ContainerError(f"{budget.label}: corrupt zip archive ({e})") from e


def _plan_zip(infos: list[zipfile.ZipInfo], budget: _Budget) -> list[tuple[zipfile.ZipInfo, str]]:
    """Every check that the central directory allows, before a byte is written."""
    tree, plan = _Tree(budget.label), []
    for info in infos:
        budget.count_entry()
        _check_zip_entry(budget.label, info)
        is_dir = info.is_dir() or stat.S_ISDIR(info.external_attr >> 16)
        name = _entry_name(budget.label, info.filename, is_dir)
        _check_length(budget, info.filename, name)
        tree.add(info.filename, name, is_dir)
        if not is_dir:
            budget.declare(info.filename, info.file_size, info.compress_size)
            plan.append((info, name))
    if not plan:
        raise ContainerError(f"{budget.label}: the archive holds no files")
    return plan


def _check_zip_entry(label: str, info: zipfile.ZipInfo) -> None:
    raw = info.filename
    special = _SPECIAL.get(stat.S_IFMT(info.external_attr >> 16))
    if special:
        raise ContainerError(
            f"{label}: entry {raw!r} is a {special}; only files and directories are accepted"
        )
    if info.flag_bits & 0x1:
        raise ContainerError(f"{label}: entry {raw!r} is encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ContainerError(
            f"{label}: entry {raw!r} uses compression method {info.compress_type}; "
            "only stored and deflated entries are accepted"
        )


def _extract_zip_entry(zf, info, name, work, budget: _Budget) -> tuple[str, int]:
    label, raw, declared = budget.label, info.filename, info.file_size

    def guard(n: int, total: int) -> None:
        if total > declared:
            raise ContainerError(
                f"{label}: entry {raw!r} holds more than the {declared} bytes it declares"
            )
        budget.spend(n)

    # zipfile silently cuts data at the declared size; lift that so a lie is seen.
    probe = copy.copy(info)
    probe.file_size = 1 << 62
    try:
        with zf.open(probe) as src:
            size = _copy(src, _target(work, name), guard)
    except _CORRUPT as e:
        raise ContainerError(f"{label}: entry {raw!r} is corrupt ({e})") from e
    if size != declared:
        raise ContainerError(f"{label}: entry {raw!r} holds {size} bytes but declares {declared}")
    return name, size


# --- tar ---------------------------------------------------------------------------------


def _unpack_tar(archive: Path, work: Path, budget: _Budget, gz: bool) -> list[tuple[str, int]]:
    kind = "tar.gz" if gz else "tar"
    with open(archive, "rb") as raw:
        reader = _Reader(gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw, budget)
        try:
            # typeshed's tarfile wants a writable, closable file; reading needs neither.
            with tarfile.open(fileobj=reader, mode="r:") as tf:  # type: ignore[call-overload]
                members = _members(tf, budget)
                files = [_extract_tar_member(tf, m, name, work, budget) for m, name in members]
                _check_tar_end(tf, reader, budget.label)
        except _CORRUPT as e:
            raise ContainerError(f"{budget.label}: corrupt {kind} archive ({e})") from e
    files = [f for f in files if f is not None]
    if not files:
        raise ContainerError(f"{budget.label}: the archive holds no files")
    return files


class _Reader:
    """The decompressed tar stream, as tarfile reads it: every byte read is budgeted."""

    def __init__(self, stream, budget: _Budget):
        self.stream, self.budget, self.last = stream, budget, b""

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n > MAX_HEADER_READ:  # tarfile reads whole pax/GNU headers in one go
            raise ContainerError(
                f"{self.budget.label}: a tar header is over {MAX_HEADER_READ} bytes"
            )
        self.last = self.stream.read(n)
        self.budget.stream_at(self.stream.tell())
        return self.last

    def seek(self, position: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            self.budget.stream_at(position)  # gzip decompresses up to there
        return self.stream.seek(position, whence)

    def tell(self) -> int:
        return self.stream.tell()

    def seekable(self) -> bool:
        return True


def _members(tf: tarfile.TarFile, budget: _Budget):
    tree = _Tree(budget.label)
    for member in tf:
        budget.count_entry()
        _check_tar_type(budget.label, member)
        name = _entry_name(budget.label, member.name, member.isdir())
        _check_length(budget, member.name, name)
        tree.add(member.name, name, member.isdir())
        yield member, name


def _check_tar_type(label: str, member: tarfile.TarInfo) -> None:
    if member.isreg() or member.isdir():
        return
    tests = (
        ("symbolic link", member.issym),
        ("hard link", member.islnk),
        ("character device", member.ischr),
        ("block device", member.isblk),
        ("fifo", member.isfifo),
    )
    what = next((what for what, test in tests if test()), f"tar entry of type {member.type!r}")
    raise ContainerError(
        f"{label}: entry {member.name!r} is a {what}; only files and directories are accepted"
    )


def _extract_tar_member(tf, member, name: str, work: Path, budget: _Budget):
    if member.isdir():
        return None
    budget.declare(member.name, member.size)
    src = tf.extractfile(member)
    return name, _copy(src, _target(work, name), lambda n, _total: budget.spend(n))


def _check_tar_end(tf: tarfile.TarFile, reader: _Reader, label: str) -> None:
    """tarfile ends the listing quietly at a damaged header; a damaged archive is refused."""
    if reader.last.strip(b"\0"):
        raise ContainerError(
            f"{label}: corrupt tar archive (damaged or truncated header at byte {tf.offset})"
        )
    while reader.read(CHUNK):  # reading to the end checks the gzip CRC and length
        pass


# --- files -------------------------------------------------------------------------------


def _target(work: Path, name: str) -> Path:
    target = work.joinpath(*name.split("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _copy(src, target: Path, guard: Callable[[int, int], None]) -> int:
    """Copy ``src`` to a new file in chunks; ``guard(chunk, total)`` may refuse first."""
    total = 0
    with open(target, "xb") as out:
        while chunk := src.read(CHUNK):
            total += len(chunk)
            guard(len(chunk), total)
            out.write(chunk)
    return total


def _move_into_place(label: str, work: Path, dest: Path) -> None:
    if not dest.exists():
        work.chmod(0o755)  # mkdtemp made it private
        work.rename(dest)
        return
    children = sorted(work.iterdir())
    for child in children:
        if os.path.lexists(dest / child.name):
            raise ContainerError(f"{label}: {child.name!r} already exists in {dest}")
    for child in children:
        child.rename(dest / child.name)
