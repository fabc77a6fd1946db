"""The HTTP transport under the fetcher and the notifier: cut by a deadline, strict on framing.

Guarantees:

- Inside ``with RequestDeadline(seconds):``, every connection the thread opens is shut down
  once ``seconds`` have passed since the block began, whether the request is connecting,
  waiting for its headers, reading them a byte at a time, or reading the body. Only a
  wall-clock limit ends a server that trickles: the read timeout applies to each socket
  read, and the headers arrive before any code of ours sees the response. The socket is
  recorded the moment it exists (before TLS and before the request is sent), so the
  process's one watchdog thread can end the blocked read; a shutdown wakes it at once.
  Deadlines nest: the innermost one takes the sockets opened inside it.
- A response whose header block ends in end-of-file instead of a blank line raises
  ``TruncatedHeaders``: ``http.client`` would otherwise take the EOF as the end of the
  headers and hand over an empty, "complete" body.
- A response with a Content-Length that has more bytes already waiting once the announced
  body is read is flagged (``overlong``): ``http.client`` stops at the announced length and
  would otherwise let the surplus pass unseen. Only bytes already received are seen; the
  check costs one non-blocking read at the end of the body.

- A connection goes only to an address ``netpolicy`` judged for its host and port, inside
  ``pinned.judged``, and is refused (``pinned.Unjudged``) outside one; the name is never
  resolved again to connect. The ``Host`` header, the TLS SNI and the certificate check
  still use the name.
- Through ``strict_session``, nothing of the operator's environment reaches a request: no
  credentials from ``~/.netrc`` or ``$NETRC``, no proxy from ``HTTP(S)_PROXY`` or
  ``ALL_PROXY``, which would connect to an address never judged. Only a CA bundle named by
  ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE`` is used, as ``requests`` would, read once
  per process.

Depositors' URLs get this transport from ``strict_session``, the operator's own services
(EZID, Merritt storage) from ``pinned_session`` and ``operator_request``; it works for any
``requests.Session``. ``post_once`` is the one POST the notifier and the webhook make with
it. Every outbound HTTP request of the ingest is judged and connected here.
"""

from __future__ import annotations

import copy
import functools
import heapq
import http.client
import itertools
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from contextlib import closing
from http.cookiejar import Cookie
from typing import cast

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.cookies import RequestsCookieJar, merge_cookies
from requests.hooks import default_hooks
from requests.sessions import merge_hooks, merge_setting
from requests.structures import CaseInsensitiveDict
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util.timeout import _DEFAULT_TIMEOUT

from . import httputil, pinned
from .errors import FetchError, ServiceError

log = logging.getLogger(__name__)

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
        self._expired = False
        self._watch: list | None = None
        self._outer: RequestDeadline | None = None

    @property
    def expired(self) -> bool:
        return self._expired

    def __enter__(self) -> RequestDeadline:
        self._outer = getattr(_local, "deadline", None)
        _local.deadline = self
        if self.seconds is not None:
            self._watch = _watchdog.watch(self, self.started + self.seconds)
        return self

    def __exit__(self, *exc) -> None:
        if self._watch is not None:
            _watchdog.forget(self._watch)
            self._watch = None
        _local.deadline = self._outer
        with self._lock:
            self._sockets.clear()

    def attach(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
        if self._expired:  # the deadline passed while this connection was being made
            _shutdown(sock)

    def _cut(self) -> None:
        # Set before the list is read: a socket attached after that read sees it (attach).
        self._expired = True
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)


class _Watchdog:
    """The one thread of a process that cuts every ``RequestDeadline`` when its time comes.

    A thread per deadline would cost every request a thread's start (and its stack) for a
    timer that almost never fires. This one sleeps until the earliest deadline it watches
    and holds a deadline only from its ``__enter__`` to its ``__exit__``. A deadline that
    ends before its time costs no wake-up: the thread finds it gone when it wakes. Having
    found nothing to watch for ``IDLE_SECONDS``, the thread ends; the next deadline starts
    it again.
    """

    IDLE_SECONDS = 60.0

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._due: list[list] = []  # a heap of [when, order, deadline]
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: RequestDeadline, when: float) -> list:
        """Cut ``deadline`` at ``when`` (``time.monotonic``) unless forgotten before."""
        entry = [when, next(self._order), deadline]
        with self._cond:
            heapq.heappush(self._due, entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="request-deadlines", daemon=True
                )
                self._thread.start()
            elif self._due[0] is entry:  # sooner than what the thread sleeps until
                self._cond.notify()
        return entry

    def forget(self, entry: list) -> None:
        with self._cond:
            if self._due and self._due[0] is entry:
                heapq.heappop(self._due)
            else:
                try:
                    self._due.remove(entry)
                except ValueError:
                    return  # already taken to be cut
                heapq.heapify(self._due)

    def watching(self) -> int:
        with self._cond:
            return len(self._due)

    def _run(self) -> None:
        try:
            self._watch_until_idle()
        finally:
            with self._cond:
                # Ended by anything but idleness: the next deadline starts a new thread.
                if self._thread is threading.current_thread():
                    self._thread = None

    def _watch_until_idle(self) -> None:
        last_busy = time.monotonic()
        while True:
            with self._cond:
                now = time.monotonic()
                if not self._due:
                    if now - last_busy >= self.IDLE_SECONDS:
                        self._thread = None
                        return
                    self._cond.wait(last_busy + self.IDLE_SECONDS - now)
                    continue
                last_busy = now
                if self._due[0][0] > now:
                    self._cond.wait(self._due[0][0] - now)
                    continue
                expired = []
                while self._due and self._due[0][0] <= now:
                    expired.append(heapq.heappop(self._due)[2])
            for deadline in expired:
                try:
                    deadline._cut()
                except Exception:  # one deadline's trouble must not end the others' watch
                    log.exception("could not cut the connections of an expired request")


_watchdog = _Watchdog()


def _new_watchdog_in_child() -> None:
    # The parent's thread does not exist in a forked child, and its lock may have been held.
    global _watchdog
    _watchdog = _Watchdog()


os.register_at_fork(after_in_child=_new_watchdog_in_child)


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
    """Connects only to an address judged for its host and port (``pinned``), and hands
    each new socket to the request's deadline before a byte is sent or read."""

    response_class: type[http.client.HTTPResponse] = _StrictResponse

    def _new_conn(self) -> socket.socket:
        # urllib3's own would resolve the host again, which is what DNS rebinding exploits.
        timeout = self.timeout
        if timeout is _DEFAULT_TIMEOUT:
            timeout = socket.getdefaulttimeout()
        try:
            sock = pinned.open_socket(
                self.host,
                self.port,
                timeout,
                source_address=self.source_address,
                socket_options=self.socket_options,
            )
        except TimeoutError as exc:
            raise ConnectTimeoutError(
                self, f"Connection to {self.host} timed out. (connect timeout={timeout})"
            ) from exc
        except OSError as exc:
            raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc
        sys.audit("http.client.connect", self, self.host, self.port)
        deadline = getattr(_local, "deadline", None)
        if deadline is not None:
            deadline.attach(sock)
        return sock


class _TrackedHTTPConnection(_Tracked, HTTPConnection):
    pass


class _TrackedHTTPSConnection(_Tracked, HTTPSConnection):
    pass


class _NoKeptSockets(HTTPConnectionPool):
    """A pool that keeps no socket once its response is done: the next request through it
    connects anew, so its socket is attached to that request's deadline (a socket kept
    alive would still belong to the deadline of the request that opened it)."""

    def _put_conn(self, conn) -> None:
        if conn is not None:
            conn.close()
        super()._put_conn(conn)


class _HTTPPool(_NoKeptSockets):
    ConnectionCls = _TrackedHTTPConnection


class _HTTPSPool(_NoKeptSockets, HTTPSConnectionPool):
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

    The session may serve one request after another (see ``Sender``): its pools keep no
    socket between them, so each request connects under its own deadline. Its cookie jar
    is the caller's to empty between requests that must not share cookies.
    """
    session.trust_env = False
    if session.verify is True:
        session.verify = _ca_bundle()
    return pinned_session(session)


def pinned_session(session: requests.Session) -> requests.Session:
    """``session`` with this module's transport for http and https: its requests connect
    only inside ``pinned.judged``, to the addresses judged. The environment is left as the
    session takes it: the operator's own services may be reached through a proxy (a request
    sent to a proxy goes through requests' own pool, not this transport, see
    ``operator_request``)."""
    session.mount("http://", _StrictAdapter())
    session.mount("https://", _StrictAdapter())
    return session


def operator_request(
    session: requests.Session, method: str, url: str, **kwargs
) -> requests.Response:
    """``session.request(method, url, **kwargs)`` to a service the operator configured
    (EZID, Merritt storage), through this transport (``pinned_session``).

    The operator chose the address, so loopback and private ones are allowed; the kinds
    ``netpolicy`` always refuses (link-local, where cloud metadata answers, and the like)
    are not. A request the environment sends through a proxy is not judged here: the proxy
    resolves the name, and the operator chose it. ``FetchError`` when refused.
    """
    if _proxy_for(session, url):
        return session.request(method, url, **kwargs)
    with pinned.judged(url, allow_loopback=True, allow_private=True):
        return session.request(method, url, **kwargs)


def call_operator(
    session_factory: Callable[[], requests.Session],
    method: str,
    url: str,
    *,
    error: type[ServiceError],
    who: str,
    about: str = "",
    hint: str = "",
    **kwargs,
) -> requests.Response:
    """One ``operator_request`` in a session of its own, redirects not followed. A refused
    address, or a service that cannot be reached, raises ``error`` naming ``who`` (``about``
    after "could not be reached", then the cause, then ``hint``), retryable as the cause is.
    """
    try:
        with closing(pinned_session(session_factory())) as session:
            return operator_request(session, method, url, allow_redirects=False, **kwargs)
    except FetchError as exc:
        raise error(f"{who}: {exc.message}", retryable=exc.retryable) from exc
    except requests.RequestException as exc:
        raise error(
            f"{who} could not be reached{about}: {httputil.describe(exc)}{hint}",
            retryable=httputil.is_transient(exc),
        ) from exc


def _proxy_for(session: requests.Session, url: str) -> str | None:
    settings = session.merge_environment_settings(url, {}, None, None, None)
    return requests.utils.select_proxy(url, settings["proxies"])


class Sender:
    """``session.request(method, url, headers=headers, stream=True, allow_redirects=False,
    timeout=timeout)`` for a strict session used one request after another.

    requests merges the session's settings (headers, parameters, proxies, hooks) into every
    request anew, through runtime protocol checks that cost more than the rest of preparing
    it. Here they are merged once, by requests' own functions, when the sender is made: the
    session's settings must not change after that. What reaches ``session.send`` (the
    prepared request, its cookies, the send options) is what ``session.request`` would hand
    it; the response, its cookies and its errors are ``session.send``'s own.
    """

    def __init__(self, session: requests.Session, headers: dict[str, str]) -> None:
        if session.trust_env:
            raise ValueError("a Sender needs a session from strict_session")
        self.session = session
        self._headers = merge_setting(headers, session.headers, dict_class=CaseInsensitiveDict)
        # None, not an empty mapping: the same URL, without another protocol check.
        self._params = merge_setting({}, session.params) or None
        self._hooks = merge_hooks(default_hooks(), session.hooks)
        self._options = {
            "proxies": merge_setting({}, session.proxies),
            "stream": True,
            "verify": session.verify,
            "cert": session.cert,
        }
        # A cookie jar iterates over its cookies (typeshed has a RequestsCookieJar's names).
        self._cookies = cast("list[Cookie]", list(session.cookies))

    def request(self, method: str, url: str, timeout) -> requests.Response:
        prepared = requests.PreparedRequest()
        prepared.prepare(
            method=method.upper(),
            url=url,
            headers=self._headers,
            params=self._params,
            auth=self.session.auth,
            cookies=merge_cookies(RequestsCookieJar(), self.session.cookies),
            hooks=self._hooks,
        )
        return self.session.send(prepared, timeout=timeout, allow_redirects=False, **self._options)

    def forget_cookies(self) -> None:
        """Back to the cookies the session was made with: those servers set since are gone."""
        jar = self.session.cookies
        jar.clear()
        for cookie in self._cookies:
            jar.set_cookie(copy.copy(cookie))


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
    allow_loopback: bool = False,
    allow_private: bool = False,
) -> tuple[requests.Response, bytes]:
    """One POST through this transport to the addresses ``url`` is judged to have
    (``pinned.judged``; ``FetchError`` when refused), redirects not followed, under one
    ``deadline`` from connect to the answer's last byte (``TooSlow`` once it passed); the
    response, closed, and at most ``keep`` bytes of its body (decoded; empty when they
    cannot be read: only a hint). Other failures raise as ``requests`` raises them."""
    policy = {"allow_loopback": allow_loopback, "allow_private": allow_private}
    with pinned.judged(url, **policy):
        return _post(url, body, headers, timeout, deadline, session_factory, keep)


def _post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: tuple[float, float],
    deadline: float,
    session_factory: Callable[[], requests.Session],
    keep: int,
) -> tuple[requests.Response, bytes]:
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
