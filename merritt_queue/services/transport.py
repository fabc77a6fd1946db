"""The HTTP transport under the fetcher and the notifier: cut by a deadline, strict on framing.

Guarantees:

- Inside ``with RequestDeadline(seconds):``, every connection the thread opens is shut down
  once ``seconds`` have passed since the block began, whether the request is connecting,
  waiting for its headers, reading them a byte at a time, or reading the body. Only a
  wall-clock limit ends a server that trickles: the read timeout applies to each socket
  read, and the headers arrive before any code of ours sees the response. The socket is
  recorded the moment it exists (before TLS and before the request is sent), so a timer
  thread can end the blocked read; a shutdown wakes it at once.
- A response whose header block ends in end-of-file instead of a blank line raises
  ``TruncatedHeaders``: ``http.client`` would otherwise take the EOF as the end of the
  headers and hand over an empty, "complete" body.
- A response with a Content-Length that has more bytes already waiting once the announced
  body is read is flagged (``overlong``): ``http.client`` stops at the announced length and
  would otherwise let the surplus pass unseen. Only bytes already received are seen; the
  check costs one non-blocking read at the end of the body.

- Nothing of the operator's environment reaches a request: no credentials from ``~/.netrc``
  or ``$NETRC``, no proxy from ``HTTP(S)_PROXY`` or ``ALL_PROXY``; the connection goes to the
  address the URL names. Only a CA bundle named by ``REQUESTS_CA_BUNDLE`` or
  ``CURL_CA_BUNDLE`` is used, as ``requests`` would, read once per process.

Sessions get this transport from ``strict_session``; it works for any ``requests.Session``.
``post_once`` is the one POST the notifier and the webhook make with it.
"""

from __future__ import annotations

import functools
import http.client
import os
import socket
import threading
import time
from collections.abc import Callable
from contextlib import closing

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_local = threading.local()


class TruncatedHeaders(http.client.HTTPException):
    """The connection ended inside the response's headers."""


class RequestDeadline:
    """One wall-clock limit over every connection the current thread opens inside it."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._expired = threading.Event()
        self._timer: threading.Timer | None = None
        self._outer: RequestDeadline | None = None

    @property
    def expired(self) -> bool:
        return self._expired.is_set()

    def __enter__(self) -> RequestDeadline:
        self._outer = getattr(_local, "deadline", None)
        _local.deadline = self
        if self.seconds is not None:
            remaining = max(0.0, self.started + self.seconds - time.monotonic())
            self._timer = threading.Timer(remaining, self._cut)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
        _local.deadline = self._outer
        with self._lock:
            self._sockets.clear()

    def attach(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
        if self.expired:  # the deadline passed while this connection was being made
            _shutdown(sock)

    def _cut(self) -> None:
        self._expired.set()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by its owner: its read has ended anyway


class _WatchedLines:
    """The response's file during the header block, noting whether a line read hit EOF."""

    def __init__(self, fp) -> None:
        self.fp = fp
        self.hit_eof = False

    def readline(self, limit: int = -1) -> bytes:
        line = self.fp.readline(limit)
        if not line:
            self.hit_eof = True
        return line

    def __getattr__(self, name):
        return getattr(self.fp, name)


class _StrictResponse(http.client.HTTPResponse):
    def __init__(self, sock, *args, **kwargs) -> None:
        super().__init__(sock, *args, **kwargs)
        self._mq_sock = sock
        self._mq_announced: int | None = None
        self.overlong = False

    def begin(self) -> None:
        if self.headers is not None:
            return
        real = self.fp
        watch = self.fp = _WatchedLines(real)
        try:
            super().begin()
        finally:
            if self.fp is watch:
                self.fp = real
        if watch.hit_eof:
            raise TruncatedHeaders("the server closed the connection inside the response headers")
        if self._method != "HEAD" and not self.chunked and self.length is not None:
            self._mq_announced = self.length

    def _close_conn(self) -> None:
        if self._mq_announced is not None and self.length == 0 and self.fp is not None:
            self.overlong = _bytes_waiting(self.fp, self._mq_sock)
        super()._close_conn()  # type: ignore[misc]  # http.client's private hook, not in typeshed


def _bytes_waiting(fp, sock: socket.socket) -> bool:
    """Whether bytes past the announced body are already buffered or on the socket."""
    try:
        timeout = sock.gettimeout()
        sock.settimeout(0)
    except OSError:
        return False
    try:
        return bool(fp.peek(1))
    except (OSError, ValueError):  # nothing waiting (TLS says "want read"), or closed
        return False
    finally:
        try:
            sock.settimeout(timeout)
        except OSError:
            pass


class _Tracked(HTTPConnection):
    """Hands each new socket to the request's deadline before a byte is sent or read."""

    response_class: type[http.client.HTTPResponse] = _StrictResponse

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        deadline = getattr(_local, "deadline", None)
        if deadline is not None:
            deadline.attach(sock)
        return sock


class _TrackedHTTPConnection(_Tracked, HTTPConnection):
    pass


class _TrackedHTTPSConnection(_Tracked, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection


class _StrictAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


def strict_session(session: requests.Session) -> requests.Session:
    """``session`` with this module's transport for http and https, deaf to the environment.

    Its URLs come from depositors. A session that trusts the environment sends a URL's host
    the operator's credentials for it from ``~/.netrc`` (or ``$NETRC``), and sends the
    request through the proxy ``HTTP(S)_PROXY`` names, a connection to an address
    ``netpolicy`` never judged; it also reads all of that again on every request. Only the
    CA bundle ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE`` names is kept, read once: it
    decides whom we trust and sends nothing.
    """
    session.trust_env = False
    if session.verify is True:
        session.verify = _ca_bundle()
    session.mount("http://", _StrictAdapter())
    session.mount("https://", _StrictAdapter())
    return session


@functools.cache
def _ca_bundle() -> str | bool:
    """What ``requests`` would verify against with the environment trusted."""
    return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True


class TooSlow(requests.Timeout):
    """No complete answer within the request's wall-clock deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no complete answer within {seconds:g} s")
        self.seconds = seconds


def post_once(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: tuple[float, float],
    deadline: float,
    session_factory: Callable[[], requests.Session] = requests.Session,
    keep: int = 0,
) -> tuple[requests.Response, bytes]:
    """One POST through this transport, redirects not followed, under one ``deadline`` from
    connect to the answer's last byte (``TooSlow`` once it passed); the response, closed, and
    at most ``keep`` bytes of its body (decoded; empty when they cannot be read: only a hint).
    Other failures raise as ``requests`` raises them."""
    clock = RequestDeadline(deadline)
    try:
        with clock, closing(strict_session(session_factory())) as session:
            resp = session.post(
                url, data=body, headers=headers, timeout=timeout, allow_redirects=False, stream=True
            )
            with closing(resp):
                head = _start_of(resp, keep) if keep else b""
    except requests.RequestException as exc:
        if clock.expired:
            raise TooSlow(deadline) from exc
        raise
    return resp, head


def _start_of(resp: requests.Response, size: int) -> bytes:
    try:
        return resp.raw.read(size, decode_content=True) or b""
    except (OSError, ValueError, urllib3.exceptions.HTTPError):
        return b""


def raw_readinto(resp: requests.Response) -> Callable[[memoryview], int]:
    """How to read ``resp``'s raw body (never decoded) straight into a buffer: the number
    of bytes read, 0 at its end.

    http.client's own ``readinto``, under urllib3: urllib3's ``read`` returns a new bytes
    object each time, an allocation and a copy per chunk that a big download pays for.
    http.client still stops at the Content-Length and flags a longer body (``overlong``),
    and the deadline still ends a read by shutting the socket. Its errors are the socket's
    (``TimeoutError``, ``OSError``) and http.client's (``IncompleteRead`` for a chunked body
    cut short), not urllib3's. A response without one (not from this transport) is read
    through urllib3 and copied.
    """
    fp = getattr(resp.raw, "_fp", None)
    if isinstance(fp, http.client.HTTPResponse):
        return fp.readinto

    def copy_into(buffer: memoryview) -> int:
        data = resp.raw.read(len(buffer), decode_content=False)
        buffer[: len(data)] = data
        return len(data)

    return copy_into


def overlong(resp: requests.Response) -> bool:
    """Whether the server sent more than the Content-Length it announced (seen so far)."""
    return bool(getattr(getattr(resp.raw, "_fp", None), "overlong", False))


def truncated_headers(exc: BaseException) -> bool:
    """Whether ``exc`` (a requests or urllib3 error) comes from ``TruncatedHeaders``."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        item = todo.pop()
        if id(item) in seen or not isinstance(item, BaseException):
            continue
        seen.add(id(item))
        if isinstance(item, TruncatedHeaders):
            return True
        todo.extend([item.__cause__, item.__context__, *item.args])
        if isinstance(item, urllib3.exceptions.MaxRetryError):
            todo.append(item.reason)
    return False
