"""A stand-in for one node of Merritt's storage service (mrt-store), on the test HTTP server.

It answers in the shapes the real service sends, as read from its source:

- ``POST /add/<node>/<ark>`` and ``POST /update/<node>/<ark>`` (multipart; ``manifest``, a
  checkm add-manifest; ``delete``, names one a line, on update; ``responseForm``) answer the
  new version's state (mrt-store ``JerseyStorage.addVersionMultipartSpec`` /
  ``updateVersionMultipartSpec``). Storage fetches every ``nfo:fileURL`` of the manifest
  itself and checks its size and digest; the columns are found by the ``#%columns`` line and
  ``#%eof`` must end the manifest. An add is exactly the manifest's files; an update carries
  the current version's files forward, the manifest's added or replacing, ``delete``'s names
  removed (``cloud/action/UpdateVersion``, mrt-core2 ``cloud/VersionMap.getMergeInfo``); an
  update of an object with no version makes the first. A delete list naming a file the
  current version does not hold (or any delete list when there is no version) is refused,
  400, and nothing is stored.
- ``GET /state/<node>/<ark>``, ``.../<version>`` and ``.../<version>/<file>`` with ``t=json``
  answer ``ObjectState``, ``VersionState`` and ``FileState`` as mrt-core2's ``JSONFormatter``
  renders them: its XML (``XMLFormatter``, every element prefixed with the state's namespace,
  ``obj``/``ver``/``fil``, the root carrying ``xmlns:<prefix>``) turned into JSON by org.json's
  ``XML.toJSONObject``. So a repeated element is a list but a single one is the bare value;
  text that reads as a number or boolean becomes one; an absent list (a version with no
  files) is no key at all. A version's ``ver:fileStates`` holds only each file's *state URL*
  (``StoreUtil.buildContentURL``: ARK and file name each ``URLEncoder``-encoded, ``/`` as
  ``%2F``, space as ``+``); size and ``fil:messageDigest`` (``<algorithm>=<hex>``) are only in
  the file's own state.

``fail_next`` holds statuses to answer before doing any work; while ``down``, every request
is answered 503, as a node whose service is stopped behind its proxy; ``lose_replies`` is
how many stores to make and then drop the connection without a reply, as a reply lost on the
way back.
Only 127.0.0.1 is fetched from.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import urllib.request
from dataclasses import dataclass
from urllib.parse import quote_plus, unquote, urlsplit

from harness.httpserver import HttpServer, Recorded, Reply, multipart_form

_CREATED = "2026-01-02T03:04:05-08:00"
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)")


@dataclass(frozen=True)
class StoredEntry:
    name: str
    size: int
    algorithm: str
    digest: str


class MerrittStore:
    def __init__(self, server: HttpServer, node: str = "7777") -> None:
        self.server = server
        self.url = server.url
        self.node = node
        self.objects: dict[str, list[list[StoredEntry]]] = {}
        self.fail_next: list[int] = []
        self.lose_replies = 0
        self.down = False
        self._lock = threading.Lock()
        server.route("/add/", lambda rec: self._store(rec, update=False))
        server.route("/update/", lambda rec: self._store(rec, update=True))
        server.route("/state/", self._state)

    def names(self, ark: str, version: int) -> list[str]:
        return sorted(f.name for f in self.objects[ark][version - 1])

    def posts(self) -> list[Recorded]:
        return [r for r in self.server.requests if r.method == "POST"]

    # -- storing --------------------------------------------------------------------------

    def _store(self, rec: Recorded, *, update: bool) -> Reply:
        if self.down:
            return _text(503, "storage is unavailable")
        if self.fail_next:
            return _text(self.fail_next.pop(0), "storage is unwell")
        node, ark = _parts(rec)[:2]
        form = multipart_form(rec.headers.get("content-type", ""), rec.body)
        if node != self.node or "manifest" not in form:
            return _text(400, "bad add request")
        if "delete" in form and not update:
            return _text(400, "an add takes no delete list")
        try:
            files = [_fetch(row) for row in _manifest_rows(form["manifest"])]
        except ValueError as exc:
            return _text(400, str(exc))
        deleted = set(form.get("delete", b"").decode("utf-8").splitlines())
        with self._lock:
            versions = self.objects.setdefault(ark, [])
            current = {f.name for f in versions[-1]} if versions else set()
            if missing := sorted(deleted - current):
                # VersionMap.getMergeInfo / getMergeComponents refuse the whole update.
                return _text(400, f"Delete list component not found:{missing[0]}")
            if update and versions:
                new = {f.name for f in files}
                files = [f for f in versions[-1] if f.name not in deleted | new] + files
            versions.append(files)
            number = len(versions)
            lose = self.lose_replies > 0
            self.lose_replies -= lose
        if lose:
            return Reply(drop=True)
        return _json(200, self._version_state(ark, number))

    # -- states ---------------------------------------------------------------------------

    def _state(self, rec: Recorded) -> Reply:
        if self.down:
            return _text(503, "storage is unavailable")
        if "t=json" not in (urlsplit(rec.path).query or ""):
            return _text(400, "this stand-in answers t=json only")
        parts = _parts(rec)
        versions = self.objects.get(parts[1]) if len(parts) > 1 else None
        if parts[0] != self.node or not versions:
            return _not_found(f"object not found: {parts[1:2]}")
        ark = parts[1]
        if len(parts) == 2:
            return _json(200, self._object_state(ark))
        number = int(parts[2])
        if not 1 <= number <= len(versions):
            return _not_found(f"version not found: {number}")
        if len(parts) == 3:
            return _json(200, self._version_state(ark, number))
        entry = next((f for f in versions[number - 1] if f.name == parts[3]), None)
        if entry is None:
            return _not_found(f"file not found: {parts[3]}")
        return _json(200, self._file_state(ark, number, entry))

    def _object_state(self, ark: str) -> dict:
        versions = self.objects[ark]
        current = versions[-1]
        return _root(
            "obj",
            "objectState",
            identifier=ark,
            numFiles=len(current),
            size=sum(f.size for f in current),
            numVersions=len(versions),
            object=self._link("content", ark),
            versionStates={
                "versionState": [self._link("state", ark, n) for n in range(1, len(versions) + 1)]
            },
            currentVersionState=self._link("state", ark, len(versions)),
            nodeState=f"{self.url}/state/{self.node}",
            lastAddVersion=_CREATED,
            nodeID=self.node,
        )

    def _version_state(self, ark: str, number: int) -> dict:
        files = self.objects[ark][number - 1]
        fields: dict = {
            "objectState": self._link("state", ark),
            "version": self._link("content", ark, number),
            "objectID": ark,
            "identifier": number,
            "created": _CREATED,
            "current": "true" if number == len(self.objects[ark]) else "false",
            "numFiles": len(files),
            "totalSize": sum(f.size for f in files),
        }
        if files:
            fields["fileStates"] = {
                "fileState": [self._link("state", ark, number, f.name) for f in files]
            }
        return _root("ver", "versionState", **fields)

    def _file_state(self, ark: str, number: int, f: StoredEntry) -> dict:
        return _root(
            "fil",
            "fileState",
            identifier=f.name,
            size=f.size,
            messageDigest=f"{f.algorithm}={f.digest}",
            mimeType="application/octet-stream",
            created=_CREATED,
            file=self._link("content", ark, number, f.name),
            versionState=self._link("state", ark, number),
        )

    def _link(self, kind: str, ark: str, version: int | None = None, name: str = "") -> str:
        url = f"{self.url}/{kind}/{self.node}/{quote_plus(ark)}"
        if version is not None:
            url += f"/{version}"
        return url + (f"/{quote_plus(name)}" if name else "")


def _root(prefix: str, name: str, **fields) -> dict:
    """org.json's rendering of ``<prefix:name xmlns:prefix=...>`` holding ``fields``."""
    body: dict = {f"xmlns:{prefix}": f"http://uc3.cdlib.org/ontology/mrt/store/{name[:-5]}"}
    body |= {f"{prefix}:{k}": _element(prefix, v) for k, v in fields.items()}
    return {f"{prefix}:{name}": body}


def _element(prefix: str, value):
    if isinstance(value, dict):
        return {f"{prefix}:{k}": _element(prefix, v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_element(prefix, v) for v in value]
        return items[0] if len(items) == 1 else items
    return _scalar(str(value))


def _scalar(text: str):
    """org.json ``XML.stringToValue``: numbers and booleans lose their quotes."""
    if text in ("true", "false"):
        return text == "true"
    if _NUMBER.fullmatch(text):
        return int(text)
    return text


def _manifest_rows(text: bytes) -> list[dict[str, str]]:
    """The rows of a checkm add-manifest by column name (``nfo:fileURL`` -> ``fileURL``)."""
    lines = [line for line in text.decode("utf-8").splitlines() if line.strip()]
    if not lines or lines[-1].strip() != "#%eof":
        raise ValueError("the manifest does not end with #%eof")
    columns: list[str] = []
    rows = []
    for line in lines[:-1]:
        if line.startswith("#%columns"):
            columns = [c.strip().split(":")[-1] for c in line.split("|")[1:]]
        elif not line.startswith("#"):
            if not columns:
                raise ValueError("a manifest row before #%columns")
            rows.append(dict(zip(columns, (c.strip() for c in line.split("|")), strict=False)))
    return rows


def _fetch(row: dict[str, str]) -> StoredEntry:
    url, name = row["fileURL"], row["fileName"]
    if urlsplit(url).hostname != "127.0.0.1":
        raise ValueError(f"refusing to fetch {url}: tests only talk to 127.0.0.1")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as resp:
        data = resp.read()
    algorithm = row["hashAlgorithm"].lower().replace("-", "")
    if hashlib.new(algorithm, data).hexdigest() != row["hashValue"].lower():
        raise ValueError(f"digest mismatch for {name}")
    if row.get("fileSize") and len(data) != int(row["fileSize"]):
        raise ValueError(f"size mismatch for {name}")
    return StoredEntry(name, len(data), algorithm, row["hashValue"].lower())


def _parts(rec: Recorded) -> list[str]:
    """The path's segments after the first, decoded as Jersey decodes path parameters."""
    return [unquote(p) for p in urlsplit(rec.path).path.split("/")[2:]]


def _json(status: int, data: dict) -> Reply:
    return Reply(status, json.dumps(data).encode(), {"Content-Type": "application/json"})


def _not_found(message: str) -> Reply:
    return _json(404, {"exc:exception": {"exc:status": 404, "exc:error": message}})


def _text(status: int, text: str) -> Reply:
    return Reply(status, (text + "\n").encode(), {"Content-Type": "text/plain; charset=UTF-8"})
