"""Storing object versions through Merritt's storage service.

``POST {base}/add/{node}/{ark}`` makes a complete version; ``POST {base}/update/{node}/{ark}``
an update (the current version carried forward by storage itself, the manifest's files added
or replacing, the ``delete`` field's names, one a line, removed), as Merritt's own ingest
calls them (mrt-ingest HandlerTransfer, mrt-store JerseyStorage). ``GET
{base}/state/{node}/{ark}[/{v}]`` reads what is stored. File names are sent as the job names
them (``producer/...``, ``system/...``).

Storage pulls the files itself, so ``file_url`` maps each local file to a URL storage can
fetch. Each version also gets ``system/mrt-queue-token-<token>.txt``: storage keeps no token of
ours, and that file is how ``find_by_token`` recognises a version already stored (so a POST
whose answer was lost is not repeated into a second version); an update deletes the previous
version's token file, so each version carries its own. What a version changed is planned here
with ``versions.plan_version`` from the current version's state, which also tells a content
duplicate (nothing is posted). The shape of the version state's file list
(``ver:fileStates``) follows our test double; check it against a real node before production
use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote, unquote

import requests

from . import httputil, transport
from .errors import FetchError, StorageError
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
from .versions import StoredFile, StoredVersion, plan_version

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
        existing, latest, old_tokens = self._scan(ark, token)
        if existing is not None:
            return existing
        if self.file_url is None:
            raise StorageError(
                "MerrittStorageClient needs file_url to tell storage where files are"
            )
        sources, delete = checked_input(source_dir, files, delete)
        _refuse_checkm_breaking_names([name for name, _ in sources] + list(delete))
        algorithms = manifest_algorithms(manifest)
        stored = [describe_file(name, path, algorithms) for name, path in sources]
        verify_against_manifest(manifest, stored)
        plan = plan_version(latest.files if latest else None, stored, mode, delete)
        if latest is not None and plan.unchanged:
            return replace(latest, changes=plan.changes, unchanged=True)
        token_path = Path(source_dir) / TOKEN_SOURCE_NAME
        try:
            token_path.write_text(token, encoding="utf-8")
        except OSError as exc:
            raise storage_disk_error(token_path, exc) from exc
        lines = [self._checkm_line(f.name, p, f) for f, (_, p) in zip(stored, sources, strict=True)]
        token_file = describe_file(token_file_name(token), token_path, STORED_ALGORITHMS)
        lines.append(self._checkm_line(token_file.name, token_path, token_file))
        checkm = _CHECKM_HEADER + "".join(lines) + "#%eof\n"
        if mode == "update":
            version = self._post("update", ark, checkm, delete=[*delete, *old_tokens])
        else:
            version = self._post("add", ark, checkm)
        return StoredVersion(ark, version, plan.files, token, plan.changes)

    def get_version(self, ark: str, version: int) -> StoredVersion:
        files, tokens = self._version_files(ark, version)
        return StoredVersion(ark=ark, version=version, files=files, token=(tokens or [""])[-1])

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

    def _scan(
        self, ark: str, token: str
    ) -> tuple[StoredVersion | None, StoredVersion | None, list[str]]:
        """One walk of the object's versions, newest first: the version that already carries
        ``token`` (a POST whose answer was lost), the current version, and the names of its
        token files (an update deletes them)."""
        latest = None
        old_tokens: list[str] = []
        for number in reversed(self.versions(ark)):
            files, tokens = self._version_files(ark, number)
            if token in tokens:
                return StoredVersion(ark, number, files, token), latest, old_tokens
            if latest is None:
                latest = StoredVersion(ark, number, files, (tokens or [""])[-1])
                old_tokens = [token_file_name(t) for t in tokens]
        return None, latest, old_tokens

    def _version_files(self, ark: str, version: int) -> tuple[list[StoredFile], list[str]]:
        data = self._get_json(f"/state/{self.node_id}/{quote(ark, safe='')}/{version}", ark)
        if data is None:
            raise StorageError(f"{ark} has no version {version} on storage node {self.node_id}")
        state = data.get("ver:versionState") or {}
        files, tokens = [], []
        for f in _as_list(state.get("ver:fileStates")):
            name = str(f.get("fil:identifier", ""))
            token = _token_of(name)
            if token is not None:
                tokens.append(token)
                continue
            algorithm, _, value = str(f.get("fil:digest", "")).partition("=")
            digests = {algorithm: value} if value else {}
            files.append(StoredFile(name, int(f.get("fil:size", 0)), digests))
        return files, tokens

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
            return int(resp.json()["ver:versionState"]["ver:identifier"])
        except (ValueError, KeyError, TypeError):
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
        try:
            with closing(transport.pinned_session(self.session_factory())) as session:
                return transport.operator_request(
                    session, method, url, timeout=self.timeout, allow_redirects=False, **kwargs
                )
        except FetchError as exc:
            raise StorageError(
                f"storage at {self.base_url}: {exc.message}", retryable=exc.retryable
            ) from exc
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


def _refuse_checkm_breaking_names(names) -> None:
    # checkm separates fields with "|" and entries with line ends; such a name cannot be sent.
    for name in names:
        if "|" in name or "\n" in name or "\r" in name:
            raise StorageError(f"file name {name!r} cannot be sent in a checkm manifest; refused")


def _as_list(value) -> list[dict]:
    if isinstance(value, list):
        return value
    return [value] if isinstance(value, dict) else []
