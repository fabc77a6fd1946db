"""Storing object versions on a local disk (and the checks every storage adapter shares).

Guarantees of ``LocalStorage``:

- A version appears whole or not at all: it is built under ``root/.tmp/<uuid>`` (files,
  ``manifest.json`` and each of its directories fsynced once all their entries are in place)
  and published by one ``os.rename`` to ``<object>/v<N>``, durable (the object's directory
  fsynced, and the root's when the object is new) before ``store_version`` returns. If another
  writer took ``v<N>`` first, the version is planned again on top of that one; versions are
  never overwritten.
- Add and update mean what they mean in Merritt (``versions.plan_version``): an update carries
  the current version's files forward, replaces or adds the submitted ones and drops the
  delete list's names. A file whose bytes the current version already holds (carried, or
  submitted again unchanged) is hard-linked, never copied: an update costs the bytes of what
  changed. Stored files are made read-only, since one inode may now serve many versions.
- A version that would hold exactly the current files is not written (``unchanged``).
- Idempotent by ``token`` (the job id): when a version of the ARK already carries the token, that
  version is returned and nothing is copied, so a worker killed after storing but before
  committing never makes a second version. The whole store runs under a per-ARK ``flock``,
  which serialises writers of one ARK on one host (the queue's storage lock in ZooKeeper
  serialises them across hosts).
- When a manifest is given, every file it lists must be stored with the listed size and
  digests, checked before publishing; otherwise ``StorageError`` and nothing is left behind.
- Names are relative POSIX paths inside the version (Merritt's ``producer/...`` and
  ``system/...``); absolute names, ``..``, symlinks, duplicates and ``manifest.json`` are refused.

``manifest.json`` lists every file of the version (carried ones too) with its size and
digests, the mode, the version it was made on and what changed. Manifest entries given to
``store_version`` are dicts: ``{"name": "dir/file.txt", "size": 123 (optional), "digests":
{"sha256": "...", "md5": "..."} (optional; algorithm names such as ``SHA-256`` are accepted)}``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from ..deposit.arks import ARK_SHAPE, is_ark
from ..deposit.digest import Hashers, normalise_algorithm
from ..deposit.fsnames import LOCK_SUFFIX, ark_name_problem, escape_ark
from .durable import fsync_dir, make_dirs
from .errors import ManifestMismatch, StorageError
from .versions import (
    FileChange,
    StoredFile,
    StoredVersion,
    VersionPlan,
    check_mode,
    diff,
    plan_version,
)

__all__ = ["FileChange", "LocalStorage", "Storage", "StoredFile", "StoredVersion"]

STORED_ALGORITHMS = ("sha256", "md5")
_VERSION_DIR = re.compile(r"v([1-9][0-9]*)")
_MAX_PROBLEMS_SHOWN = 20
# Where MerrittStorageClient puts the token file in a source directory; never stored as content.
TOKEN_SOURCE_NAME = ".mrt-queue-token.txt"
# How often a store is planned again because another writer published the number it chose.
_PUBLISH_ATTEMPTS = 10
_READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH


class Storage(Protocol):
    def store_version(
        self,
        ark: str,
        source_dir: Path,
        files: list[tuple[str, Path]] | None,
        *,
        token: str,
        manifest: list[dict] | None = None,
        mode: str = "add",
        delete: tuple[str, ...] | list[str] = (),
    ) -> StoredVersion:
        """``add``: the version is exactly ``files``. ``update``: the current version's files
        carried forward, ``files`` added or replacing the same names, ``delete`` removed."""
        ...

    def get_version(self, ark: str, version: int) -> StoredVersion: ...

    def versions(self, ark: str) -> list[int]: ...

    def find_by_token(self, ark: str, token: str) -> StoredVersion | None: ...


# -- shared checks ------------------------------------------------------------------------


def ark_problem(ark: str, label: str = "primary_id") -> str | None:
    """Why ``ark`` cannot name an object in storage, or None: the shape of an ARK, then
    ``ark_name_problem``. The submission door judges by this, and ``check_request`` again
    before storage is touched."""
    if not is_ark(ark):
        return f"{label} {ark[:100]!r} is not an ARK: give it as {ARK_SHAPE}"
    return ark_name_problem(ark, label)


def check_request(ark: str, token: str, mode: str) -> None:
    """What every adapter's ``store_version`` checks before it reads storage."""
    if problem := ark_problem(ark, "the ARK"):
        raise StorageError(f"{problem}; refused")
    if not token or not token.strip():
        raise StorageError(f"storing a version of {ark} needs a token (the job id)")
    check_mode(mode)


def checked_input(
    source_dir: Path, files: list[tuple[str, Path]] | None, delete
) -> tuple[list[tuple[str, Path]], tuple[str, ...]]:
    """The files to store and the names to delete, each name checked (``source_files``)."""
    return source_files(source_dir, files), tuple(check_name(n) for n in delete)


def check_name(name: str) -> str:
    """A stored file name must be a plain relative path; returns it normalised."""
    if "\0" in name or any(part in ("", ".", "..") for part in name.split("/")):
        raise StorageError(f"file name {name!r} is not a plain relative path; refused")
    if name == "manifest.json":  # the version's own manifest lives there
        raise StorageError("file name 'manifest.json' is reserved at the top of a version")
    return name


def source_files(source_dir: Path, files: list[tuple[str, Path]] | None) -> list[tuple[str, Path]]:
    """(stored name, local path) pairs, checked; all regular files under ``source_dir`` if None."""
    source_dir = Path(source_dir)
    if files is None:
        files = [
            (p.relative_to(source_dir).as_posix(), p)
            for p in sorted(source_dir.rglob("*"))
            if not p.is_dir() and not p.name.startswith(TOKEN_SOURCE_NAME)
        ]
    seen: set[str] = set()
    checked = []
    for name, path in files:
        name = check_name(name)
        if name in seen:
            raise StorageError(f"file name {name!r} is given twice")
        seen.add(name)
        local = source_dir / path
        if local.is_symlink() or not local.is_file():
            what = "a symbolic link" if local.is_symlink() else "missing or not a regular file"
            raise StorageError(f"source file {local} for {name!r} is {what}; refused")
        checked.append((name, local))
    return checked


def verify_against_manifest(manifest: list[dict] | None, stored: list[StoredFile]) -> None:
    """StorageError listing every manifest entry the stored files do not match."""
    if manifest is None:
        return
    by_name = {f.name: f for f in stored}
    problems = []
    for entry in manifest:
        name = check_name(str(entry.get("name", "")))
        problems += _entry_problems(name, entry, by_name.get(name))
    if problems:
        shown = problems[:_MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        tail = f"\n- and {more} more" if more > 0 else ""
        raise ManifestMismatch(
            "the files do not match the manifest; nothing was stored:\n"
            + "\n".join(f"- {p}" for p in shown)
            + tail
        )


def _entry_problems(name: str, entry: dict, stored: StoredFile | None) -> list[str]:
    if stored is None:
        return [f"{name}: listed in the manifest but not among the files"]
    problems = []
    size = entry.get("size")
    if size is not None and int(size) != stored.size:
        problems.append(f"{name}: size mismatch: expected {size} bytes, got {stored.size}")
    for algorithm, value in _entry_digests(name, entry).items():
        got = stored.digests.get(algorithm)
        if got != value:
            problems.append(f"{name}: {algorithm} mismatch: expected {value}, got {got}")
    return problems


def _entry_digests(name: str, entry: dict) -> dict[str, str]:
    try:
        return {
            normalise_algorithm(a): str(v).strip().lower()
            for a, v in (entry.get("digests") or {}).items()
        }
    except ValueError as exc:
        raise StorageError(f"manifest entry {name!r}: {exc}") from None


def manifest_algorithms(manifest: list[dict] | None) -> set[str]:
    algorithms = set(STORED_ALGORITHMS)
    for entry in manifest or []:
        algorithms |= set(_entry_digests(str(entry.get("name", "")), entry))
    return algorithms


def describe_file(name: str, path: Path, algorithms) -> StoredFile:
    """``path`` read once: its size and digests, stored under ``name``."""
    hasher = Hashers(sorted(set(algorithms)))
    size = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                hasher.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise StorageError(f"cannot read source file {path}: {exc.strerror or exc}") from exc
    return StoredFile(name=name, size=size, digests=hasher.hexdigests())


def storage_disk_error(path: Path, exc: OSError) -> StorageError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageError(f"storage disk full while writing {path}", retryable=True)
    return StorageError(f"cannot write {path}: {exc.strerror or exc}")


# -- local storage ------------------------------------------------------------------------


class _NumberTaken(Exception):
    """Another writer published the version number this build was planned for."""


class LocalStorage:
    """Objects under ``root/<escaped ark>/v<N>/{producer/..., system/..., manifest.json}``."""

    def __init__(self, root: Path, chunk_size: int = 1 << 20) -> None:
        self.root = Path(root)
        self.chunk_size = chunk_size
        self._root_made = False
        self._next_sweep = 0.0

    def store_version(
        self,
        ark: str,
        source_dir: Path,
        files: list[tuple[str, Path]] | None,
        *,
        token: str,
        manifest: list[dict] | None = None,
        mode: str = "add",
        delete: tuple[str, ...] | list[str] = (),
    ) -> StoredVersion:
        check_request(ark, token, mode)
        existing = self.find_by_token(ark, token)
        if existing is not None:
            return existing
        sources, delete = checked_input(source_dir, files, delete)
        self._sweep_stale_builds()
        with self._lock(ark):
            for _ in range(_PUBLISH_ATTEMPTS):
                # Another worker with the same token may have published while we waited.
                existing = self.find_by_token(ark, token)
                if existing is not None:
                    return existing
                latest = self._latest(ark)
                try:
                    return self._store_on(latest, ark, sources, token, manifest, mode, delete)
                except _NumberTaken:
                    continue
        raise StorageError(
            f"{ark}: other writers kept publishing versions while this one was built; try again",
            retryable=True,
        )

    def get_version(self, ark: str, version: int) -> StoredVersion:
        data = self._read_manifest(ark, version)
        files = [StoredFile(f["name"], f["size"], f["digests"]) for f in data["files"]]
        if "changes" in data:
            changes = tuple(FileChange(c["name"], c["change"]) for c in data["changes"])
        else:  # written before versions recorded their changes
            before = self.get_version(ark, version - 1).files if version > 1 else None
            changes = diff(before, files)
        return StoredVersion(ark, version, files, data["token"], changes)

    def versions(self, ark: str) -> list[int]:
        try:
            names = os.listdir(self._object_dir(ark))
        except FileNotFoundError:
            return []
        return sorted(int(m[1]) for n in names if (m := _VERSION_DIR.fullmatch(n)))

    def find_by_token(self, ark: str, token: str) -> StoredVersion | None:
        for version in reversed(self.versions(ark)):
            if self._read_manifest(ark, version).get("token") == token:
                return self.get_version(ark, version)
        return None

    def version_path(self, ark: str, version: int) -> Path:
        return self._object_dir(ark) / f"v{version}"

    # -- internals ----------------------------------------------------------------------

    STALE_BUILD_SECONDS = 86400
    SWEEP_EVERY_SECONDS = 3600

    def _store_on(
        self,
        latest: StoredVersion | None,
        ark: str,
        sources: list[tuple[str, Path]],
        token: str,
        manifest: list[dict] | None,
        mode: str,
        delete: tuple[str, ...],
    ) -> StoredVersion:
        algorithms = manifest_algorithms(manifest)
        submitted = self._submitted(latest, sources, algorithms)
        plan = plan_version(
            latest.files if latest else None, list(submitted.values()), mode, delete
        )
        if latest is not None and plan.unchanged:
            verify_against_manifest(manifest, [submitted[n] for n, _ in sources])
            return replace(latest, changes=plan.changes, unchanged=True)
        number = (latest.version if latest else 0) + 1
        paths = dict(sources)
        tmp, stored = self._build(
            latest, plan, paths, submitted, algorithms, manifest, mode, token, ark
        )
        try:
            self._publish(ark, tmp, number)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return StoredVersion(ark, number, stored, token, plan.changes)

    def _submitted(
        self, latest: StoredVersion | None, sources: list[tuple[str, Path]], algorithms: set[str]
    ) -> dict[str, StoredFile]:
        """The submitted files as the plan needs them. Only a file the current version holds
        under its name with its size can be unchanged, so only those are read now (to be
        linked, not copied); the others' digests come from copying them."""
        before = {f.name: f for f in latest.files} if latest else {}
        described = {}
        for name, path in sources:
            size = path.stat().st_size
            old = before.get(name)
            if old is not None and old.size == size:
                described[name] = describe_file(name, path, algorithms | set(old.digests))
            else:
                described[name] = StoredFile(name, size, {})
        return described

    def _build(
        self, latest, plan: VersionPlan, paths, submitted, algorithms, manifest, mode, token, ark
    ):
        """A complete, verified, fsynced version directory under ``root/.tmp``, and its files."""
        tmp = self.root / ".tmp" / uuid.uuid4().hex
        try:
            folders = self._make_folders(tmp, [f.name for f in plan.files])
            stored = []
            for f in plan.files:
                if f.name in plan.carried:
                    old = self._link(latest, plan.carried[f.name], tmp / f.name)
                    # A file submitted again unchanged was read by _submitted: its digests
                    # cover every algorithm the manifest names.
                    stored.append(submitted.get(f.name, old))
                else:
                    stored.append(self._copy(paths[f.name], tmp / f.name, f.name, algorithms))
            verify_against_manifest(manifest, [f for f in stored if f.name in paths])
            self._write_manifest(tmp, ark, token, mode, latest, stored, plan.changes)
            for folder in folders:
                fsync_dir(folder)
            return tmp, stored
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise storage_disk_error(tmp, exc) from exc
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @staticmethod
    def _make_folders(tmp: Path, names: list[str]) -> list[Path]:
        """``tmp`` and the folders the files ``names`` go in, each made once; all of them."""
        try:
            tmp.mkdir()
        except FileNotFoundError:
            tmp.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()
        folders = [tmp]
        # a/b/c.txt is in a/b, which is in a
        below = {n.rsplit("/", i)[0] for n in names for i in range(1, n.count("/") + 1)}
        # A folder's name sorts before the names below it, so it is made before them.
        for folder in sorted(below):
            path = tmp / folder
            path.mkdir()
            folders.append(path)
        return folders

    def _link(self, latest: StoredVersion, old: StoredFile, dest: Path) -> StoredFile:
        """The previous version's bytes under ``dest``: a hard link, a copy only where the file
        system cannot link (another device, the inode's link limit)."""
        src = self.version_path(latest.ark, latest.version) / old.name
        try:
            os.link(src, dest)
            return old
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EMLINK, errno.EPERM, errno.ENOTSUP):
                raise
        copied = self._copy(src, dest, old.name, set(old.digests))
        if not copied.same_content(old):
            raise StorageError(
                f"{latest.ark} version {latest.version}: {old.name} no longer matches its "
                "recorded digests; the stored copy is damaged, nothing was stored"
            )
        return old

    def _sweep_stale_builds(self) -> None:
        """Remove builds a killed writer left in ``.tmp``; a day-old build is nobody's. Looked
        for at most once an hour: a day-old build can wait an hour more."""
        if time.monotonic() < self._next_sweep:
            return
        self._next_sweep = time.monotonic() + self.SWEEP_EVERY_SECONDS
        cutoff = time.time() - self.STALE_BUILD_SECONDS
        for build in (self.root / ".tmp").glob("*"):
            try:
                if build.stat().st_mtime < cutoff:
                    shutil.rmtree(build, ignore_errors=True)
            except FileNotFoundError:  # another writer removed or published it meanwhile
                continue

    def _object_dir(self, ark: str) -> Path:
        return self.root / escape_ark(ark)

    def _latest(self, ark: str) -> StoredVersion | None:
        numbers = self.versions(ark)
        return self.get_version(ark, numbers[-1]) if numbers else None

    def _read_manifest(self, ark: str, version: int) -> dict:
        path = self.version_path(ark, version) / "manifest.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise StorageError(f"{ark} has no version {version} in {self.root}") from None
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc

    @contextmanager
    def _lock(self, ark: str) -> Iterator[None]:
        if not self._root_made:  # objects under a root a crash forgot would be lost with it
            make_dirs(self.root)
            self._root_made = True
        locks = self.root / ".locks"
        locks.mkdir(exist_ok=True)
        with open(locks / f"{escape_ark(ark)}{LOCK_SUFFIX}", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield

    def _copy(self, src: Path, dest: Path, name: str, algorithms: set[str]) -> StoredFile:
        hasher = Hashers(sorted(algorithms))
        size = 0
        try:
            fin = open(src, "rb")
        except OSError as exc:
            raise StorageError(f"cannot read source file {src}: {exc.strerror or exc}") from exc
        with fin, open(dest, "xb") as fout:
            while chunk := fin.read(self.chunk_size):
                hasher.update(chunk)
                fout.write(chunk)
                size += len(chunk)
            fout.flush()
            os.fchmod(fout.fileno(), _READ_ONLY)
            os.fsync(fout.fileno())
        return StoredFile(name=name, size=size, digests=hasher.hexdigests())

    def _write_manifest(self, tmp, ark, token, mode, latest, stored, changes) -> None:
        data = {
            "ark": ark,
            "token": token,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "mode": mode,
            "previous": latest.version if latest else None,
            "files": [{"name": f.name, "size": f.size, "digests": f.digests} for f in stored],
            "changes": [{"name": c.name, "change": c.change} for c in changes],
        }
        with open(tmp / "manifest.json", "x", encoding="utf-8") as f:
            # In one call, without indent: the only way json encodes in C, not Python.
            f.write(json.dumps(data, sort_keys=True))
            f.flush()
            os.fsync(f.fileno())

    def _publish(self, ark: str, tmp: Path, number: int) -> None:
        """Rename ``tmp`` to ``v<number>``; _NumberTaken if another writer has it."""
        obj = self._object_dir(ark)
        try:
            obj.mkdir()
            new_object = True
        except FileExistsError:
            new_object = False
        except OSError as exc:
            raise storage_disk_error(obj, exc) from exc
        try:
            os.rename(tmp, obj / f"v{number}")
        except OSError as exc:
            # Another host (whose lock we cannot see) took this number first.
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise _NumberTaken() from None
            raise storage_disk_error(obj, exc) from exc
        fsync_dir(obj)
        if new_object:
            fsync_dir(self.root)
