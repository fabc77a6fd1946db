"""Storing object versions through Merritt's storage service (mrt-store).

``POST {base}/add/{node}/{ark}`` makes a complete version; ``POST {base}/update/{node}/{ark}``
an update (the current version carried forward by storage itself, the manifest's files added
or replacing, the ``delete`` field's names, one a line, removed): mrt-store
``app/jersey/store/JerseyStorage`` ``addVersionMultipartSpec`` /
``updateVersionMultipartSpec``, multipart fields ``manifest``, ``delete``, ``responseForm``.
(mrt-ingest's ``HandlerTransfer`` hands storage the same manifest and delete list.)
Storage pulls the files itself, so ``file_url`` maps each local file to a URL storage can
fetch, sent in a checkm add-manifest (``#%columns`` names the fields, ``#%eof`` ends it).
File names are sent as the job names them (``producer/...``, ``system/...``).

What is stored is read with ``GET {base}/state/{node}/{ark}[/{v}[/{file}]]?t=json``, whose
shapes ``mrtstate`` reads: a version's state lists only its files' state URLs, so names come
from the version state alone and a file's size and digests from its own state, fetched only
for the files that need them (those an update keeps or a submission may replace) and a few
at a time.

Each version also gets ``system/mrt-queue-token-<token>.txt``: storage keeps no token of
ours, and that file, recognised by name in a version's state, is how a store finds a version
it already made (a POST whose reply was lost is answered with that version, never repeated
into a second one). An update deletes the current version's token files, so each version
carries its own and only its own (an add holds exactly its manifest). The ``delete`` field
names only files the current version holds: storage refuses a whole update whose delete list
names one it lacks (mrt-core2 ``cloud/VersionMap.getMergeComponents``), where the plan
ignores such a name. What a version changes
is planned with ``versions.plan_version`` against the current version as storage holds it,
which also tells a content duplicate (nothing is posted).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

import requests

from . import calllog, httputil, mrtstate, transport
from .errors import StorageError
from .storage import (
    STORED_ALGORITHMS,
    TOKEN_SOURCE_NAME,
    check_request,
    checked_input,
    describe_file,
    manifest_algorithms,
    storage_disk_error,
    verify_against_manifest,
)
from .versions import StoredFile, StoredVersion, diff, plan_version

_TOKEN_PREFIX = "system/mrt-queue-token-"
# File states read at once when a version's sizes and digests are needed.
_STATE_READERS = 8
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


def _write_token_file(source_dir: Path, token: str) -> Path:
    """The token file storage fetches, written whole under a name of this call's own and
    renamed into place: two attempts of one job write the same bytes, and storage never
    reads a half-written one."""
    path = source_dir / TOKEN_SOURCE_NAME
    own = source_dir / f"{TOKEN_SOURCE_NAME}.{uuid.uuid4().hex}"
    try:
        own.write_text(token, encoding="utf-8")
        os.replace(own, path)
    except OSError as exc:
        own.unlink(missing_ok=True)
        raise storage_disk_error(path, exc) from exc
    return path


def _token_of(name: str) -> str | None:
    if name.startswith(_TOKEN_PREFIX) and name.endswith(".txt"):
        return unquote(name.removeprefix(_TOKEN_PREFIX).removesuffix(".txt"))
    return None


class MerrittStorageClient:
    """One storage node of Merritt's storage service; see the module's docstring."""

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

    def on_node(self, node_id: str | int) -> MerrittStorageClient:
        """The same service, another of its nodes (a profile names its own)."""
        if str(node_id) == self.node_id:
            return self
        return MerrittStorageClient(
            self.base_url,
            node_id,
            self.timeout,
            file_url=self.file_url,
            session_factory=self.session_factory,
        )

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
        found, latest = self._scan(ark, token)
        if found is not None:
            return self._found(ark, found)
        if self.file_url is None:
            raise StorageError(
                "MerrittStorageClient needs file_url to tell storage where files are"
            )
        sources, delete = checked_input(source_dir, files, delete)
        _refuse_checkm_breaking_names([name for name, _ in sources] + list(delete))
        algorithms = manifest_algorithms(manifest)
        stored = [describe_file(name, path, algorithms) for name, path in sources]
        verify_against_manifest(manifest, stored)
        current = self._current(ark, latest, stored, mode, delete) if latest else None
        plan = plan_version(current, stored, mode, delete)
        if latest is not None and current is not None and plan.unchanged:
            return StoredVersion(
                ark, latest.number, current, latest.token, plan.changes, unchanged=True
            )
        token_path = _write_token_file(Path(source_dir), token)
        lines = [self._checkm_line(f.name, p, f) for f, (_, p) in zip(stored, sources, strict=True)]
        token_file = describe_file(token_file_name(token), token_path, STORED_ALGORITHMS)
        lines.append(self._checkm_line(token_file.name, token_path, token_file))
        checkm = _CHECKM_HEADER + "".join(lines) + "#%eof\n"
        if mode == "update":
            # Storage refuses the whole update if one name is not in the current version.
            held = [n for n in delete if n not in plan.ignored_deletes]
            old_tokens = [token_file_name(t) for t in latest.tokens] if latest else []
            version = self._post("update", ark, checkm, delete=[*held, *old_tokens])
        else:
            version = self._post("add", ark, checkm)
        return StoredVersion(ark, version, plan.files, token, plan.changes)

    def get_version(self, ark: str, version: int) -> StoredVersion:
        """Every file of ``version`` with the size and digests storage holds for it."""
        listing = self._listing(ark, version)
        states = self._file_states(ark, version, listing.names)
        return StoredVersion(ark, version, [states[n] for n in listing.names], listing.token)

    def versions(self, ark: str) -> list[int]:
        data = self._get_json(f"/state/{self.node_id}/{quote(ark, safe='')}", ark)
        if data is None:
            return []
        return list(range(1, mrtstate.version_count(data) + 1))

    def find_by_token(self, ark: str, token: str) -> StoredVersion | None:
        found, _ = self._scan(ark, token)
        return self._found(ark, found) if found is not None else None

    # -- internals ----------------------------------------------------------------------

    def _scan(self, ark: str, token: str) -> tuple[_Listing | None, _Listing | None]:
        """One walk of the object's version states, newest first, reading names only: the
        version that already carries ``token`` (a POST whose reply was lost), and the
        current version."""
        latest = None
        for number in reversed(self.versions(ark)):
            listing = self._listing(ark, number)
            if token in listing.tokens:
                return listing, latest
            latest = latest or listing
        return None, latest

    def _found(self, ark: str, listing: _Listing) -> StoredVersion:
        """The version a lost reply would have named, with what it changed since the last."""
        number = listing.number
        states = self._file_states(ark, number, listing.names)
        files = [states[n] for n in listing.names]
        before = self.get_version(ark, number - 1).files if number > 1 else None
        return StoredVersion(ark, number, files, listing.token, diff(before, files))

    def _current(
        self, ark: str, latest: _Listing, submitted: list[StoredFile], mode: str, delete
    ) -> list[StoredFile]:
        """The current version's files as the plan needs them. Only a file the new version
        keeps or may replace needs its size and digests (an update keeps all but the delete
        list, an add compares only the names it submits again); the others are read by name
        alone, which the version state gives."""
        if mode == "update":
            dropped = set(delete)
            needed = [n for n in latest.names if n not in dropped]
        else:
            names = {f.name for f in submitted}
            needed = [n for n in latest.names if n in names]
        states = self._file_states(ark, latest.number, needed)
        return [states.get(n) or StoredFile(n, 0, {}) for n in latest.names]

    def _listing(self, ark: str, version: int) -> _Listing:
        data = self._get_json(f"/state/{self.node_id}/{quote(ark, safe='')}/{version}", ark)
        if data is None:
            raise StorageError(f"{ark} has no version {version} on storage node {self.node_id}")
        names, tokens = [], []
        for name in mrtstate.file_names(data):
            token = _token_of(name)
            if token is None:
                names.append(name)
            else:
                tokens.append(token)
        return _Listing(version, names, tokens)

    def _file_states(self, ark: str, version: int, names: list[str]) -> dict[str, StoredFile]:
        """The file states of ``names``, a few requests at a time."""
        base = f"/state/{self.node_id}/{quote(ark, safe='')}/{version}/"

        def read(name: str) -> StoredFile:
            data = self._get_json(base + quote(name, safe=""), ark)
            if data is None:
                raise StorageError(
                    f"{ark} version {version} lists {name} but storage has no state for it",
                    retryable=True,
                )
            return mrtstate.stored_file(name, data)

        if len(names) <= 1:
            return {n: read(n) for n in names}
        with ThreadPoolExecutor(min(_STATE_READERS, len(names))) as pool:
            return dict(zip(names, pool.map(read, names), strict=True))

    def _checkm_line(self, name: str, path: Path, f: StoredFile) -> str:
        assert self.file_url is not None
        return f"{self.file_url(path)} | sha256 | {f.digests['sha256']} | {f.size} |  | {name} | \n"

    def _post(self, action: str, ark: str, checkm: str, delete: Sequence[str] = ()) -> int:
        url = f"{self.base_url}/{action}/{self.node_id}/{quote(ark, safe='')}"
        data = {"responseForm": "json"}
        if delete:
            data["delete"] = "".join(f"{name}\n" for name in delete)
        resp = self._request(
            "POST",
            url,
            ark,
            files={"manifest": ("manifest.checkm", checkm.encode("utf-8"), "text/plain")},
            data=data,
        )
        if resp.status_code != 200:
            raise self._status_error(f"storing {ark}", url, resp)
        try:
            return mrtstate.version_number(resp.json())
        except (ValueError, StorageError):
            # The version may exist; a retry finds it by token instead of adding another.
            raise StorageError(
                f"storage answered the {action} of {ark} with a response that names no version",
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
        return calllog.logged(
            "storage-call",
            method,
            url,
            lambda: transport.call_operator(
                self.session_factory,
                method,
                url,
                error=StorageError,
                who=f"storage at {self.base_url}",
                about=f" for {ark}",
                timeout=self.timeout,
                **kwargs,
            ),
        )

    @staticmethod
    def _status_error(what: str, url: str, resp: requests.Response) -> StorageError:
        body = resp.text.strip().replace("\n", " ")[:300]
        return StorageError(
            f"{what} failed: {url} returned {httputil.status_text(resp)}"
            + (f": {body}" if body else ""),
            retryable=httputil.is_retryable_status(resp.status_code),
        )


def _refuse_checkm_breaking_names(names) -> None:
    # checkm separates fields with "|" and entries with line ends; such a name cannot be sent.
    for name in names:
        if "|" in name or "\n" in name or "\r" in name:
            raise StorageError(f"file name {name!r} cannot be sent in a checkm manifest; refused")


@dataclass(frozen=True)
class _Listing:
    """A version as its state lists it: the content files' names and the tokens it carries."""

    number: int
    names: list[str]
    tokens: list[str]

    @property
    def token(self) -> str:
        return (self.tokens or [""])[-1]
