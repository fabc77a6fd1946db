"""Storing object versions.

Guarantees of ``LocalStorage``:

- A version appears whole or not at all: it is built under ``root/.tmp/<uuid>`` (files and
  ``manifest.json`` fsynced) and published by one ``os.rename`` to ``<object>/v<N>``. If another
  writer took ``v<N>`` first, the rename fails and the next number is tried; versions are never
  overwritten.
- Idempotent by ``token`` (the job id): when a version of the ARK already carries the token, that
  version is returned and nothing is copied, so a worker killed after storing but before
  committing never makes a second version. The check is repeated under a per-ARK ``flock``
  right before publishing, which serialises writers of one ARK on one host.
- When a manifest is given, every file it lists must be stored with the listed size and
  digests, checked on the copy before publishing; otherwise ``StorageError`` and nothing is
  left behind.
- Names are relative POSIX paths inside the version (Merritt's ``producer/...`` and
  ``system/...``); absolute names, ``..``, symlinks, duplicates and ``manifest.json`` are refused.

Manifest entries are dicts: ``{"name": "dir/file.txt", "size": 123 (optional),
"digests": {"sha256": "...", "md5": "..."} (optional; algorithm names such as ``SHA-256``
are accepted)}``.

``MerrittStorageClient`` speaks Merritt storage's add/state API; see its docstring.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, unquote

import requests

from ..digest import Hashers, normalise_algorithm
from . import httputil
from .errors import ManifestMismatch, StorageError

STORED_ALGORITHMS = ("sha256", "md5")
_VERSION_DIR = re.compile(r"v([1-9][0-9]*)")
_MAX_PROBLEMS_SHOWN = 20
# Where MerrittStorageClient puts the token file in a source directory; never stored as content.
TOKEN_SOURCE_NAME = ".mrt-queue-token.txt"


@dataclass(frozen=True)
class StoredFile:
    name: str
    size: int
    digests: dict[str, str]


CHANGES = ("added", "replaced", "carried", "deleted")


@dataclass(frozen=True)
class FileChange:
    """What became of one name from the previous version to this one (``CHANGES``)."""

    name: str
    change: str


@dataclass(frozen=True)
class StoredVersion:
    """A version: every file it holds (carried ones too), and what changed since the last.

    ``unchanged``: nothing was written, because the version asked for would hold exactly the
    files of the current one (``version``); a content duplicate is not a new version."""

    ark: str
    version: int
    files: list[StoredFile]
    token: str
    changes: tuple[FileChange, ...] = ()
    unchanged: bool = False


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


def escape_ark(ark: str) -> str:
    """A directory name for ``ark``: percent-encoding, so ``unescape_ark`` reverses it."""
    return quote(ark, safe="")


def unescape_ark(name: str) -> str:
    return unquote(name)


def _check_ark_and_token(ark: str, token: str) -> None:
    if not ark.startswith("ark:") or any(c.isspace() for c in ark):
        raise StorageError(f"{ark!r} is not an ARK (expected ark:/NAAN/name)")
    if not token or not token.strip():
        raise StorageError(f"storing a version of {ark} needs a token (the job id)")


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
            if not p.is_dir() and p.name != TOKEN_SOURCE_NAME
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


def _manifest_algorithms(manifest: list[dict] | None) -> set[str]:
    algorithms = set(STORED_ALGORITHMS)
    for entry in manifest or []:
        algorithms |= set(_entry_digests(str(entry.get("name", "")), entry))
    return algorithms


def _storage_disk_error(path: Path, exc: OSError) -> StorageError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageError(f"storage disk full while writing {path}", retryable=True)
    return StorageError(f"cannot write {path}: {exc.strerror or exc}")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- local storage ------------------------------------------------------------------------


class LocalStorage:
    """Objects under ``root/<escaped ark>/v<N>/{producer/..., manifest.json}``."""

    def __init__(self, root: Path, chunk_size: int = 1 << 20) -> None:
        self.root = Path(root)
        self.chunk_size = chunk_size

    def store_version(
        self,
        ark: str,
        source_dir: Path,
        files: list[tuple[str, Path]] | None,
        *,
        token: str,
        manifest: list[dict] | None = None,
    ) -> StoredVersion:
        _check_ark_and_token(ark, token)
        existing = self.find_by_token(ark, token)
        if existing is not None:
            return existing
        sources = source_files(source_dir, files)
        self._sweep_stale_builds()
        tmp = self._build(ark, sources, token, manifest)
        try:
            with self._lock(ark):
                # Another worker with the same token may have published while we copied.
                existing = self.find_by_token(ark, token)
                if existing is not None:
                    return existing
                version = self._publish(ark, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return self.get_version(ark, version)

    def get_version(self, ark: str, version: int) -> StoredVersion:
        path = self._object_dir(ark) / f"v{version}" / "manifest.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise StorageError(f"{ark} has no version {version} in {self.root}") from None
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        return StoredVersion(
            ark=ark,
            version=version,
            files=[StoredFile(f["name"], f["size"], f["digests"]) for f in data["files"]],
            token=data["token"],
        )

    def versions(self, ark: str) -> list[int]:
        try:
            names = os.listdir(self._object_dir(ark))
        except FileNotFoundError:
            return []
        return sorted(int(m[1]) for n in names if (m := _VERSION_DIR.fullmatch(n)))

    def find_by_token(self, ark: str, token: str) -> StoredVersion | None:
        for version in reversed(self.versions(ark)):
            stored = self.get_version(ark, version)
            if stored.token == token:
                return stored
        return None

    # -- internals ----------------------------------------------------------------------

    STALE_BUILD_SECONDS = 86400

    def _sweep_stale_builds(self) -> None:
        """Remove builds a killed writer left in ``.tmp``; a day-old build is nobody's."""
        cutoff = time.time() - self.STALE_BUILD_SECONDS
        for build in (self.root / ".tmp").glob("*"):
            try:
                if build.stat().st_mtime < cutoff:
                    shutil.rmtree(build, ignore_errors=True)
            except FileNotFoundError:  # another writer removed or published it meanwhile
                continue

    def _object_dir(self, ark: str) -> Path:
        return self.root / escape_ark(ark)

    @contextmanager
    def _lock(self, ark: str) -> Iterator[None]:
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{escape_ark(ark)}.lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield

    def _build(
        self, ark: str, sources: list[tuple[str, Path]], token: str, manifest: list[dict] | None
    ) -> Path:
        """A complete, verified, fsynced version directory under ``root/.tmp``."""
        tmp = self.root / ".tmp" / uuid.uuid4().hex
        try:
            algorithms = _manifest_algorithms(manifest)
            stored = [self._copy(src, tmp / name, name, algorithms) for name, src in sources]
            verify_against_manifest(manifest, stored)
            self._write_manifest(tmp, ark, token, stored)
            for directory, _, _ in os.walk(tmp):
                _fsync_dir(Path(directory))
            return tmp
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise _storage_disk_error(tmp, exc) from exc
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _copy(self, src: Path, dest: Path, name: str, algorithms: set[str]) -> StoredFile:
        dest.parent.mkdir(parents=True, exist_ok=True)
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
            os.fsync(fout.fileno())
        return StoredFile(name=name, size=size, digests=hasher.hexdigests())

    def _write_manifest(self, tmp: Path, ark: str, token: str, stored: list[StoredFile]) -> None:
        data = {
            "ark": ark,
            "token": token,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "files": [{"name": f.name, "size": f.size, "digests": f.digests} for f in stored],
        }
        tmp.mkdir(parents=True, exist_ok=True)
        with open(tmp / "manifest.json", "x", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())

    def _publish(self, ark: str, tmp: Path) -> int:
        """Rename ``tmp`` to the next free ``v<N>``; returns N."""
        obj = self._object_dir(ark)
        obj.mkdir(parents=True, exist_ok=True)
        version = max(self.versions(ark), default=0) + 1
        while True:
            try:
                os.rename(tmp, obj / f"v{version}")
            except OSError as exc:
                # Another host (whose lock we cannot see) took this number first.
                if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    version += 1
                    continue
                raise _storage_disk_error(obj, exc) from exc
            _fsync_dir(obj)
            return version


# -- Merritt storage service --------------------------------------------------------------

_TOKEN_PREFIX = "system/mrt-queue-token-"
_CHECKM_HEADER = (
    "#%checkm_0.7\n"
    "#%profile | http://uc3.cdlib.org/registry/store/manifest/mrt-add-manifest\n"
    "#%prefix | nfo:<http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#>\n"
    "#%prefix | nie:<http://www.semanticdesktop.org/ontologies/2007/01/19/nie/#>\n"
    "#%prefix | mrt:<http://uc3.cdlib.org/ontology/mrt/mom#>\n"
    "#%columns | nfo:fileURL | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize"
    " | nfo:fileLastModified | nfo:fileName | nie:mimeType\n"
)


def token_file_name(token: str) -> str:
    return f"{_TOKEN_PREFIX}{quote(token, safe='')}.txt"


class MerrittStorageClient:
    """Merritt storage: ``POST {base}/add/{node}/{ark}``, ``GET {base}/state/{node}/{ark}[/{v}]``.

    Storage pulls the files itself, so ``file_url`` maps each local file to a URL storage can
    fetch. Each version also gets ``system/mrt-queue-token-<token>.txt``: storage keeps no
    token of ours, and that file is how ``find_by_token`` recognises a version already stored
    (so a POST whose answer was lost is not repeated into a second version). The shape of the
    version state's file list (``ver:fileStates``) follows our test double; check it against a
    real node before production use.
    """

    def __init__(
        self,
        base_url: str,
        node_id: str | int,
        timeout: float = 60,
        *,
        file_url: Callable[[Path], str] | None = None,
        session_factory=requests.Session,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.node_id = str(node_id)
        self.timeout = timeout
        self.file_url = file_url
        self.session_factory = session_factory

    def store_version(
        self,
        ark: str,
        source_dir: Path,
        files: list[tuple[str, Path]] | None,
        *,
        token: str,
        manifest: list[dict] | None = None,
    ) -> StoredVersion:
        _check_ark_and_token(ark, token)
        existing = self.find_by_token(ark, token)
        if existing is not None:
            return existing
        if self.file_url is None:
            raise StorageError(
                "MerrittStorageClient needs file_url to tell storage where files are"
            )
        sources = source_files(source_dir, files)
        _refuse_checkm_breaking_names(name for name, _ in sources)
        algorithms = _manifest_algorithms(manifest)
        stored = [_describe_file(name, path, algorithms) for name, path in sources]
        verify_against_manifest(manifest, stored)
        token_path = Path(source_dir) / TOKEN_SOURCE_NAME
        try:
            token_path.write_text(token, encoding="utf-8")
        except OSError as exc:
            raise _storage_disk_error(token_path, exc) from exc
        lines = [
            self._checkm_line(f"producer/{f.name}", p, f)
            for f, (_, p) in zip(stored, sources, strict=True)
        ]
        token_file = _describe_file(token_file_name(token), token_path, STORED_ALGORITHMS)
        lines.append(self._checkm_line(token_file.name, token_path, token_file))
        version = self._add(ark, _CHECKM_HEADER + "".join(lines) + "#%eof\n")
        return StoredVersion(ark=ark, version=version, files=stored, token=token)

    def get_version(self, ark: str, version: int) -> StoredVersion:
        data = self._get_json(f"/state/{self.node_id}/{quote(ark, safe='')}/{version}", ark)
        if data is None:
            raise StorageError(f"{ark} has no version {version} on storage node {self.node_id}")
        state = data.get("ver:versionState") or {}
        files, token = [], ""
        for f in _as_list(state.get("ver:fileStates")):
            name = str(f.get("fil:identifier", ""))
            if name.startswith(_TOKEN_PREFIX) and name.endswith(".txt"):
                token = unquote(name.removeprefix(_TOKEN_PREFIX).removesuffix(".txt"))
            elif name.startswith("producer/"):
                algorithm, _, value = str(f.get("fil:digest", "")).partition("=")
                digests = {algorithm: value} if value else {}
                files.append(
                    StoredFile(name.removeprefix("producer/"), int(f.get("fil:size", 0)), digests)
                )
        return StoredVersion(ark=ark, version=version, files=files, token=token)

    def versions(self, ark: str) -> list[int]:
        data = self._get_json(f"/state/{self.node_id}/{quote(ark, safe='')}", ark)
        if data is None:
            return []
        count = int((data.get("obj:objectState") or {}).get("obj:numVersions", 0))
        return list(range(1, count + 1))

    def find_by_token(self, ark: str, token: str) -> StoredVersion | None:
        for version in reversed(self.versions(ark)):
            stored = self.get_version(ark, version)
            if stored.token == token:
                return stored
        return None

    # -- internals ----------------------------------------------------------------------

    def _checkm_line(self, name: str, path: Path, f: StoredFile) -> str:
        assert self.file_url is not None
        return f"{self.file_url(path)} | sha256 | {f.digests['sha256']} | {f.size} |  | {name} | \n"

    def _add(self, ark: str, checkm: str) -> int:
        url = f"{self.base_url}/add/{self.node_id}/{quote(ark, safe='')}"
        resp = self._request(
            "POST",
            url,
            ark,
            files={"manifest": ("manifest.checkm", checkm.encode("utf-8"), "text/plain")},
            data={"responseForm": "json"},
        )
        if resp.status_code != 200:
            raise self._status_error(f"storing {ark}", url, resp)
        try:
            return int(resp.json()["ver:versionState"]["ver:identifier"])
        except (ValueError, KeyError, TypeError):
            # The version may exist; a retry finds it by token instead of adding another.
            raise StorageError(
                f"storage answered the add of {ark} with a response that names no version",
                retryable=True,
            ) from None

    def _get_json(self, path: str, ark: str) -> dict | None:
        url = f"{self.base_url}{path}"
        resp = self._request("GET", url, ark, params={"t": "json"})
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise self._status_error(f"reading {ark}", url, resp)
        try:
            return resp.json()
        except ValueError:
            raise StorageError(
                f"storage sent a response that is not JSON for {url}", retryable=True
            ) from None

    def _request(self, method: str, url: str, ark: str, **kwargs) -> requests.Response:
        try:
            with closing(self.session_factory()) as session:
                return session.request(
                    method, url, timeout=self.timeout, allow_redirects=False, **kwargs
                )
        except requests.RequestException as exc:
            raise StorageError(
                f"storage at {self.base_url} could not be reached for {ark}: "
                f"{httputil.describe(exc)}",
                retryable=httputil.is_transient(exc),
            ) from exc

    @staticmethod
    def _status_error(what: str, url: str, resp: requests.Response) -> StorageError:
        body = resp.text.strip().replace("\n", " ")[:300]
        return StorageError(
            f"{what} failed: {url} returned {httputil.status_text(resp)}"
            + (f": {body}" if body else ""),
            retryable=httputil.is_retryable_status(resp.status_code),
        )


def _describe_file(name: str, path: Path, algorithms) -> StoredFile:
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


def _refuse_checkm_breaking_names(names) -> None:
    # checkm separates fields with "|" and entries with line ends; such a name cannot be sent.
    for name in names:
        if "|" in name or "\n" in name or "\r" in name:
            raise StorageError(f"file name {name!r} cannot be sent in a checkm manifest; refused")


def _as_list(value) -> list[dict]:
    if isinstance(value, list):
        return value
    return [value] if isinstance(value, dict) else []
