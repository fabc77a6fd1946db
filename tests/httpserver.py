"""A real HTTP server on 127.0.0.1 for the service adapter tests, and fakes built on it.

``http_server`` serves files from ``.root`` (GET and HEAD, correct Content-Length) and lets a
test program any path with ``behave(path, ...)``: status, delay, stalls mid-body, a body
trickled a byte at a time forever, a lying Content-Length, redirects, a number of failures
before success, a generated body (for large downloads without disk), or a custom handler.
Every request is recorded (method, path, lower-cased headers, body). ``ezid_server`` and
``merritt_storage_server`` add EZID-like endpoints and a Merritt storage node
(``harness/merrittstore.py``) on the same server. The server itself is
``harness.httpserver``, shared with the benchmarks.

Only 127.0.0.1 is ever listened on or contacted (the Merritt fake fetches file URLs, and
refuses any that are not on 127.0.0.1).
"""

from __future__ import annotations

import base64
from collections import Counter
from urllib.parse import unquote, urlsplit

import pytest

from harness.httpserver import (  # noqa: F401 (the tests import them from here)
    Behaviour,
    HttpServer,
    Recorded,
    Reply,
    multipart_form,
)


@pytest.fixture
def http_server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    server = HttpServer(root).start()
    yield server
    server.stop()


# -- EZID-like endpoint -------------------------------------------------------------------


class FakeEzid:
    """EZID's API as Merritt uses it, with basic auth and ANVL bodies, answering in EZID's
    shapes (``success: <id>`` / ``error: <why>``, text/plain):

    - ``POST /shoulder/<shoulder>`` mints (201);
    - ``GET /id/<id>`` answers the identifier's elements (400 ``no such identifier``);
    - ``POST /id/<id>`` changes the elements sent (400 when there is no such identifier);
    - ``PUT /id/<id>?update_if_exists=yes`` creates the identifier or changes it.

    ``ids`` holds each identifier's elements as EZID would (``_target`` defaulting to EZID's
    own page, ``_status`` public, ``_export`` yes, ``_owner`` the user); ``minted`` the
    elements each mint was sent. ``lose_reply(method)`` makes the next such ``/id/`` request
    take effect and then drop the connection without an answer."""

    def __init__(self, server: HttpServer, username: str = "apitest", password: str = "secret"):
        self.server = server
        self.url = server.url
        self.username = username
        self.password = password
        self.shoulders = {"ark:/99999/fk4"}
        self.minted: list[tuple[str, dict[str, str]]] = []
        self.ids: dict[str, dict[str, str]] = {}
        self._lose: Counter[str] = Counter()
        server.route("/shoulder/", self._handle)
        server.route("/id/", self._handle_id)

    def lose_reply(self, method: str, times: int = 1) -> None:
        self._lose[method] += times

    def id_requests(self, method: str | None = None) -> list[Recorded]:
        return [
            r
            for r in self.server.requests
            if r.path.startswith("/id/") and (method is None or r.method == method)
        ]

    def _refused(self, rec: Recorded) -> Reply | None:
        expected = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        if rec.headers.get("authorization") != f"Basic {expected}":
            return _text(401, "error: unauthorized")
        if rec.body and rec.headers.get("content-type", "").lower() != "text/plain; charset=utf-8":
            return _text(400, "error: bad request - unsupported content type")
        return None

    def _handle(self, rec: Recorded) -> Reply:
        if refused := self._refused(rec):
            return refused
        if rec.method != "POST":
            return _text(405, "error: method not allowed")
        shoulder = unquote(urlsplit(rec.path).path.removeprefix("/shoulder/"))
        if shoulder not in self.shoulders:
            return _text(400, f"error: bad request - no such shoulder created: {shoulder}")
        ark = f"{shoulder}{len(self.minted) + 1:06d}"
        sent = _parse_anvl(rec.body.decode("utf-8"))
        self.minted.append((ark, sent))
        self.ids[ark] = self._defaults(ark) | sent
        return _text(201, f"success: {ark}")

    def _handle_id(self, rec: Recorded) -> Reply:
        if refused := self._refused(rec):
            return refused
        parts = urlsplit(rec.path)
        ark = unquote(parts.path.removeprefix("/id/"))
        held = self.ids.get(ark)
        if rec.method == "GET":
            if held is None:
                return _text(400, "error: bad request - no such identifier")
            lines = [f"{_escape(k, ':')}: {_escape(v)}" for k, v in held.items()]
            return _text(200, "\n".join([f"success: {ark}", *lines]))
        sent = _parse_anvl(rec.body.decode("utf-8"))
        if rec.method == "POST" and held is None:
            return _text(400, "error: bad request - no such identifier")
        if rec.method == "PUT" and held is not None and "update_if_exists=yes" not in parts.query:
            return _text(400, "error: bad request - identifier already exists")
        if rec.method not in ("POST", "PUT"):
            return _text(405, "error: method not allowed")
        if held and held.get("_status") == "public" and sent.get("_status") == "reserved":
            return _text(400, "error: bad request - invalid identifier status change")
        self.ids[ark] = (held or self._defaults(ark)) | sent
        if self._lose[rec.method]:
            self._lose[rec.method] -= 1
            raise ConnectionResetError("the reply is lost")
        return _text(201 if held is None else 200, f"success: {ark}")

    def _defaults(self, ark: str) -> dict[str, str]:
        return {
            "_owner": self.username,
            "_target": f"{self.url}/id/{ark}",
            "_profile": "erc",
            "_status": "public",
            "_export": "yes",
        }


def _escape(s: str, extra: str = "") -> str:
    return "".join(f"%{ord(c):02X}" if c in "%\r\n" + extra else c for c in s)


def _parse_anvl(text: str) -> dict[str, str]:
    def unescape(s: str) -> str:
        return unquote(s)

    pairs = (line.partition(":") for line in text.splitlines() if line.strip())
    return {unescape(k.strip()): unescape(v.strip()) for k, _, v in pairs}


def _text(status: int, text: str) -> Reply:
    return Reply(status, (text + "\n").encode(), {"Content-Type": "text/plain; charset=UTF-8"})


@pytest.fixture
def ezid_server(http_server) -> FakeEzid:
    return FakeEzid(http_server)


# -- Merritt storage --------------------------------------------------------------------


@pytest.fixture
def merritt_storage_server(http_server):
    from harness.merrittstore import MerrittStore

    return MerrittStore(http_server)


# -- network guard ------------------------------------------------------------------------

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


def direct_session():
    """A requests session that ignores proxy variables: tests talk to 127.0.0.1 directly."""
    import requests

    session = requests.Session()
    session.trust_env = False
    return session


@pytest.fixture
def session_factory():
    return direct_session


@pytest.fixture
def loopback_only(monkeypatch):
    """Refuse (before connecting) and report any connection urllib3 or the pinned transport
    tries off 127.0.0.1.

    Yields the list of hosts connected to, so a test can also assert what was contacted.
    """
    import urllib3.util.connection as conn

    from merritt_queue.services import pinned

    contacted: list[str] = []
    refused: list[str] = []

    def guard(real):
        def guarded(address, *args, **kwargs):
            host = str(address[0]) if isinstance(address, tuple) else str(address)
            if host not in LOOPBACK_HOSTS:
                refused.append(host)
                raise OSError(f"test guard: refused to connect to {host}")
            contacted.append(host)
            return real(address, *args, **kwargs)

        return guarded

    monkeypatch.setattr(conn, "create_connection", guard(conn.create_connection))
    monkeypatch.setattr(pinned, "_connect", guard(pinned._connect))
    yield contacted
    assert not refused, f"code under test tried to connect off loopback: {refused}"
