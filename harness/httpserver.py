"""A real HTTP server on 127.0.0.1, programmable path by path, for the tests, the benchmarks
and the stand-ins of Merritt's services built on it (``harness.merrittstore``).

It serves files from ``.root`` (GET and HEAD, correct Content-Length) and lets a caller
program any path with ``behave(path, ...)``: status, delay, stalls mid-body, a body trickled a
byte at a time forever, a lying Content-Length, redirects, a number of failures before
success, a generated body (for large downloads without disk), or a custom handler
(``route``). Every request is recorded (method, path, lower-cased headers, body). Only
127.0.0.1 is listened on.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import cast
from urllib.parse import unquote, urlsplit


@dataclass
class Recorded:
    method: str
    path: str  # as sent, with the query
    headers: dict[str, str]  # lower-cased names
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False  # close the connection without answering, as a reply lost on the way


@dataclass
class Behaviour:
    status: int = 200
    body: bytes | None = None  # None: the file under root, or ``generate``
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # before the status line
    stall_after: int | None = None  # send this many body bytes, then wait ``stall`` seconds
    stall: float = 0.0
    announce: int | None = None  # Content-Length to announce instead of the true one
    no_length: bool = False  # send no Content-Length; the body ends when the connection closes
    redirect: str | None = None  # a path on this server or an absolute URL
    redirect_status: int = 302
    failures: int = 0  # answer ``failure_status`` to the first N requests
    failure_status: int = 503
    failure_headers: dict[str, str] = field(default_factory=dict)
    generate: tuple[int, Callable[[], Iterable[bytes]]] | None = None  # (size, chunks)
    trickle: float | None = None  # after the headers, one byte every this many seconds, forever
    handler: Callable[[Recorded], Reply] | None = None


class HttpServer:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.requests: list[Recorded] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._behaviours: dict[str, Behaviour] = {}
        self._routes: list[tuple[str, Callable[[Recorded], Reply]]] = []
        self._counts: Counter[str] = Counter()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._httpd.owner = self  # type: ignore[attr-defined]
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def start(self) -> HttpServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def url_for(self, path: str) -> str:
        return f"{self.url}{path}"

    def behave(self, path: str, **kwargs) -> str:
        """Program ``path``; returns its full URL."""
        with self._lock:
            self._behaviours[path] = Behaviour(**kwargs)
        return self.url_for(path)

    def route(self, prefix: str, handler: Callable[[Recorded], Reply]) -> None:
        """Send every request whose path starts with ``prefix`` to ``handler``."""
        with self._lock:
            self._routes.append((prefix, handler))

    def requests_for(self, path: str, method: str | None = None) -> list[Recorded]:
        with self._lock:
            return [
                r
                for r in self.requests
                if urlsplit(r.path).path == path and (method is None or r.method == method)
            ]

    def _record(self, rec: Recorded) -> tuple[Behaviour | None, int, Callable | None]:
        path = urlsplit(rec.path).path
        with self._lock:
            self.requests.append(rec)
            self._counts[path] += 1
            route = next((h for p, h in self._routes if path.startswith(p)), None)
            return self._behaviours.get(path), self._counts[path], route


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._serve()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_GET

    def log_message(self, format, *args) -> None:  # noqa: A002 - stdlib signature
        pass

    @property
    def owner(self) -> HttpServer:
        return self.server.owner  # type: ignore[attr-defined]

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        rec = Recorded(self.command, self.path, headers, body)
        behaviour, count, route = self.owner._record(rec)
        if behaviour is None:
            behaviour = Behaviour(handler=route)
        try:
            self._respond(rec, behaviour, count)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _respond(self, rec: Recorded, b: Behaviour, count: int) -> None:
        if b.delay and self.owner.stopping.wait(b.delay):
            return
        if count <= b.failures:
            body = f"failure {count} of {b.failures}\n".encode()
            return self._reply(Reply(b.failure_status, body, b.failure_headers))
        if b.handler:
            return self._reply(b.handler(rec))
        if b.redirect:
            target = b.redirect if "://" in b.redirect else self.owner.url_for(b.redirect)
            return self._reply(Reply(b.redirect_status, b"", {"Location": target}))
        if b.status >= 300:
            return self._reply(Reply(b.status, f"{b.status}\n".encode(), b.headers))
        size, chunks = self._content(urlsplit(rec.path).path, b)
        if size is None:
            return self._reply(Reply(404, b"not found\n"))
        self._send_body(b, size, chunks)

    def _content(self, path: str, b: Behaviour):
        if b.body is not None:
            return len(b.body), lambda: [b.body]
        if b.generate is not None:
            return b.generate
        file = (self.owner.root / unquote(path).lstrip("/")).resolve()
        if not file.is_relative_to(self.owner.root.resolve()) or not file.is_file():
            return None, None
        return file.stat().st_size, lambda: _file_chunks(file)

    def _send_body(self, b: Behaviour, size: int, chunks) -> None:
        self.send_response(b.status)
        for k, v in b.headers.items():
            self.send_header(k, v)
        if not b.no_length:
            self.send_header("Content-Length", str(size if b.announce is None else b.announce))
        lying = b.no_length or (b.announce is not None and b.announce != size)
        if lying:
            # The client can only see where the body ends when we close the connection.
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command == "HEAD":
            return
        if b.trickle is not None:
            return self._trickle(b.trickle)
        sent = 0
        for chunk in chunks():
            if b.stall_after is not None and sent <= b.stall_after < sent + len(chunk):
                cut = b.stall_after - sent
                self.wfile.write(chunk[:cut])
                self.wfile.flush()
                if self.owner.stopping.wait(b.stall):
                    return
                chunk = chunk[cut:]
                sent += cut
            self.wfile.write(chunk)
            sent += len(chunk)
        self.wfile.flush()

    def _trickle(self, interval: float) -> None:
        """Never finish, but never go quiet long enough for a read timeout either."""
        self.close_connection = True
        while not self.owner.stopping.wait(interval):
            self.wfile.write(b".")
            self.wfile.flush()

    def _reply(self, reply: Reply) -> None:
        if reply.drop:
            self.close_connection = True
            return
        self.send_response(reply.status)
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)


def _file_chunks(path: Path) -> Iterable[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            yield chunk


def multipart_form(content_type: str, body: bytes) -> dict[str, bytes]:
    """The fields of a ``multipart/form-data`` body, as a service's stand-in reads them."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = BytesParser(policy=policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        return {}
    return {
        cast(str, part.get_param("name", header="content-disposition")): cast(
            bytes, part.get_payload(decode=True)
        )
        for part in message.iter_parts()
    }
