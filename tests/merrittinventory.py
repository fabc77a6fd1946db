"""A stand-in for Merritt's inventory service on 127.0.0.1, answering as mrt-inventory does.

Replayed from its source (see merritt_queue/services/merrittinventory.py for the paths):

- only ``POST {context}/add`` with ``multipart/form-data`` (Jersey answers 415 to anything
  else); fields ``url`` (default empty), ``checkVersion`` (default ``true``), ``responseForm``
  (default ``xhtml``: answered here as XML);
- ``url`` must hold ``.../manifest/<node>/<ark encoded>`` (SaveObject.extractParts), else
  ``INVALID_OR_MISSING_PARM``, which that enum maps to 500;
- the manifest is read from storage: here ``versions_of(node, ark)``, the number of versions
  storage lists, given by the test (None: storage has no such object; the read fails, a
  ``GENERAL_EXCEPTION``, 500);
- with ``checkVersion``: holding more versions than storage lists is ``REQUEST_INVALID`` (400),
  holding as many writes nothing; either way a success answers ``invp:invProcessState``.

``held`` is how many versions inventory holds of each ARK (``held_elsewhere`` of an ARK it
has not been given here, as if it came from an earlier life of the database);
``adds`` records each add that took effect (node, ARK, versions held after it);
``lose_replies`` makes the next adds take effect and then drop the connection unanswered;
``fail_next`` holds statuses to answer (as a GENERAL_EXCEPTION) before doing any work.

Its local-id service (``JerseyInv`` ``callPrimary``/``callAddPrimary``, ``LocalContainerState``):
``GET {context}/primary/<owner>/<local id>`` answers ``invloc:exists`` and, when bound,
``invloc:primaryIdentifier``; ``POST {context}/primary/<ark>/<owner>/<local ids>`` binds each of
the ``;``-separated ids (``localids`` holds ``(owner, local id) -> ARK``). Path parts are
percent-decoded, as Jersey decodes path parameters; ``localid_fail_next`` as ``fail_next``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote, urlsplit
from xml.sax.saxutils import escape

import pytest

from merritt_queue.core import stepowners
from pipeline import services
from tests.httpserver import HttpServer, Recorded, Reply, multipart_form

CONTEXT = "/inventory"
_EXC_STATUS = {
    "REQUEST_INVALID": (400, "User/request supplied required parm is missing or invalid"),
    "INVALID_OR_MISSING_PARM": (500, "Program required parm is missing or invalid"),
    "GENERAL_EXCEPTION": (500, "Unexpected Programmic exception"),
}


@dataclass
class Added:
    node: int
    ark: str
    versions: int


class FakeMerrittInventory:
    def __init__(self, server: HttpServer, versions_of: Callable[[int, str], int | None]):
        self.server = server
        self.url = f"{server.url}{CONTEXT}"
        self.versions_of = versions_of
        self.held: dict[str, int] = {}
        self.held_elsewhere = 0
        self.adds: list[Added] = []
        self.lose_replies = 0
        self.fail_next: list[int] = []
        self.localids: dict[tuple[str, str], str] = {}
        self.localid_fail_next: list[int] = []
        server.route(f"{CONTEXT}/", self._handle)

    def add_requests(self) -> list[Recorded]:
        return [r for r in self.server.requests if urlsplit(r.path).path == f"{CONTEXT}/add"]

    def sent(self, rec: Recorded) -> dict[str, str]:
        form = multipart_form(rec.headers.get("content-type", ""), rec.body)
        return {k: v.decode("utf-8") for k, v in form.items()}

    def localid_requests(self) -> list[Recorded]:
        return [r for r in self.server.requests if r.path.startswith(f"{CONTEXT}/primary/")]

    def _handle(self, rec: Recorded) -> Reply:
        if urlsplit(rec.path).path.startswith(f"{CONTEXT}/primary/"):
            return self._localid(rec)
        if urlsplit(rec.path).path != f"{CONTEXT}/add":
            return Reply(404, b"not found\n", {"Content-Type": "text/plain"})
        if rec.method != "POST":
            return Reply(405, b"", {})
        if not rec.headers.get("content-type", "").startswith("multipart/form-data"):
            return Reply(415, b"Unsupported Media Type", {"Content-Type": "text/html"})
        form = self.sent(rec)
        fmt = form.get("responseForm", "xhtml")
        if self.fail_next:
            status = self.fail_next.pop(0)
            return _exception("GENERAL_EXCEPTION", "inventory is unwell", fmt, status)
        url = form.get("url", "")
        parts = urlsplit(url).path.split("/")
        if "manifest" not in parts or len(parts) < parts.index("manifest") + 3:
            return _exception("INVALID_OR_MISSING_PARM", f"URL format invalid:{url}", fmt)
        at = parts.index("manifest")
        node, ark = int(parts[at + 1]), unquote(parts[at + 2])
        listed = self.versions_of(node, ark)
        if listed is None:
            return _exception("GENERAL_EXCEPTION", f"java.io.FileNotFoundException: {url}", fmt)
        held = self.held.get(ark, self.held_elsewhere)
        if form.get("checkVersion", "true") == "true":
            if held > listed:
                return _exception(
                    "REQUEST_INVALID",
                    "SaveObject: -checkVersion - db version count exceeds passed map version:"
                    f" - objectID:{ark} - map current:{listed} - db  current:{held}",
                    fmt,
                )
            if held == listed:
                return self._answer(url, fmt)
        self.held[ark] = listed
        self.adds.append(Added(node, ark, listed))
        if self.lose_replies:
            self.lose_replies -= 1
            raise ConnectionResetError("the reply is lost")
        return self._answer(url, fmt)

    def _localid(self, rec: Recorded) -> Reply:
        url = urlsplit(rec.path)
        fmt = "json" if "t=json" in url.query else "xhtml"
        parts = [unquote(p) for p in url.path[len(f"{CONTEXT}/primary/") :].split("/")]
        if self.localid_fail_next:
            return _exception("GENERAL_EXCEPTION", "db down", fmt, self.localid_fail_next.pop(0))
        if rec.method == "GET" and len(parts) == 2:
            owner, lid = parts
            ark = self.localids.get((owner, lid))
            state = {"exists": ark is not None, "ownerID": owner, "localIDs": lid}
            return _state("invloc", "localContainerState", state | _primary(ark), fmt, 200)
        if rec.method == "POST" and len(parts) == 3:
            ark, owner, value = parts
            for lid in filter(None, (p.strip() for p in value.split(";"))):
                self.localids[(owner, lid)] = ark
            state = {"primaryIdentifier": ark, "ownerID": owner, "localIDs": value}
            return _state("invloc", "localContainerState", state, fmt, 200)
        return Reply(405 if len(parts) in (2, 3) else 404, b"", {})

    @staticmethod
    def _answer(url: str, fmt: str) -> Reply:
        state = {
            "processDateTime": datetime.now(UTC).isoformat(timespec="seconds"),
            "processUrl": url,
            "operation": "add",
        }
        return _state("invp", "invProcessState", state, fmt, 200)


def _primary(ark: str | None) -> dict:
    return {"primaryIdentifier": ark} if ark else {}


def _exception(kind: str, detail: str, fmt: str, status: int | None = None) -> Reply:
    code, description = _EXC_STATUS[kind]
    fields = {
        "status": kind,
        "statusName": kind,
        "statusDescription": description,
        "hTTPResponse": status or code,
        "error": f"org.cdlib.mrt.inv.action.SaveObject-process:0 {kind}[{description}] {detail}",
        "detail": detail,
    }
    return _state("exc", f"tException${kind}", fields, fmt, status or code)


def _state(prefix: str, name: str, fields: dict, fmt: str, status: int) -> Reply:
    if fmt == "json":
        body = json.dumps({f"{prefix}:{name}": {f"{prefix}:{k}": v for k, v in fields.items()}})
        return Reply(status, body.encode(), {"Content-Type": "application/json"})
    name = name.replace("$", "")  # not an XML name character
    inner = "".join(f"<{prefix}:{k}>{escape(str(v))}</{prefix}:{k}>" for k, v in fields.items())
    ns = f"http://uc3.cdlib.org/ontology/mrt/{prefix}"
    body = f'<?xml version="1.0"?><{prefix}:{name} xmlns:{prefix}="{ns}">{inner}</{prefix}:{name}>'
    return Reply(status, body.encode(), {"Content-Type": "text/xml"})


@pytest.fixture
def merritt_inventory_server(tmp_path):
    """An inventory stand-in on its own server; the test sets ``versions_of``."""
    server = HttpServer(tmp_path / "inventory-root")
    server.root.mkdir()
    server.start()
    yield FakeMerrittInventory(server, lambda node, ark: None)
    server.stop()


@pytest.fixture
def merritt_api(pipeline, content, settings, merritt_storage_server, merritt_inventory_server):
    """The demo profile in merritt-api mode, the site's MQ_STORAGE left local; the inventory
    stand-in reads storage's version count from the storage stand-in."""
    storage = merritt_storage_server
    settings.MQ_WORK_DIR = str(content.root / "work")
    # The profile names the node; a site default that storage does not have shows otherwise.
    settings.MERRITT_STORAGE_URL, settings.MERRITT_STORAGE_NODE = storage.url, "1"
    settings.MERRITT_STORAGE_FILE_URL = f"{content.url}/work/"
    settings.MERRITT_INVENTORY_URL = merritt_inventory_server.url
    settings.MERRITT_INVENTORY_RETRY_SECONDS = 0.2
    assert settings.MQ_STORAGE == "local"
    merritt_inventory_server.versions_of = lambda node, ark: (
        len(storage.objects[ark]) if str(node) == storage.node and ark in storage.objects else None
    )
    pipeline.profile.store_record = stepowners.MERRITT_API
    pipeline.profile.storage_node = storage.node
    pipeline.profile.save()
    services.reset()
    return merritt_inventory_server
