"""The transport's deadlines and reused sessions, on real sockets of this machine.

One watchdog thread per process cuts every expired ``RequestDeadline``: however many
requests run, no thread is started per request, an expired deadline still shuts down every
socket attached to it, deadlines nest, and nothing is kept once a block ends. A strict
session may serve one request after another: each connects anew, under its own deadline.
"""

from __future__ import annotations

import gc
import os
import socket
import threading
import time
import weakref

import pytest
import requests

from merritt_queue.services import pinned, transport
from merritt_queue.services.transport import RequestDeadline
from tests.httpserver import Reply
from tests.rawserver import RawServer, read_head

pytest_plugins = ["tests.httpserver"]

# The deadlines under test are under a second; this leaves room for a noisy shared machine.
SLACK = 8.0


def cut_after(sock: socket.socket) -> float:
    """Seconds a read of ``sock`` waited until a shutdown ended it (it never gets data)."""
    sock.settimeout(SLACK * 2)
    started = time.monotonic()
    assert sock.recv(1) == b""
    return time.monotonic() - started


def still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(1)
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)
    return False


@pytest.fixture
def pairs():
    """Connected socket pairs, closed at the end; a deadline is given the first of each."""
    made: list[tuple[socket.socket, socket.socket]] = []

    def make() -> socket.socket:
        made.append(socket.socketpair())
        return made[-1][0]

    yield make
    for a, b in made:
        a.close()
        b.close()


@pytest.fixture
def connect():
    """Connections to a server on 127.0.0.1 that never answers, each made as a request's is,
    so the current deadline takes its socket."""
    server = socket.create_server(("127.0.0.1", 0))
    made: list[socket.socket] = []

    def make() -> socket.socket:
        host, port = server.getsockname()
        conn = transport._TrackedHTTPConnection(host, port, timeout=SLACK * 2)
        with pinned.judged(f"http://{host}:{port}/", allow_loopback=True):
            conn.connect()
        assert conn.sock is not None
        made.append(conn.sock)
        return conn.sock

    yield make
    for sock in made:
        sock.close()
    server.close()


# -- one watchdog ---------------------------------------------------------------------------


@pytest.fixture
def watchdog(monkeypatch) -> transport._Watchdog:
    """A watchdog of the test's own, so no other test's deadlines are counted."""
    own = transport._Watchdog()
    monkeypatch.setattr(transport, "_watchdog", own)
    return own


def test_an_expired_deadline_shuts_down_its_sockets(pairs):
    first, second = pairs(), pairs()
    with RequestDeadline(0.3) as deadline:
        deadline.attach(first)
        deadline.attach(second)
        assert cut_after(first) < SLACK
        assert cut_after(second) < SLACK
        assert deadline.expired


def test_a_socket_attached_after_its_deadline_passed_is_shut_down_at_once(pairs):
    with RequestDeadline(0) as deadline:
        ends = time.monotonic() + SLACK
        while not deadline.expired and time.monotonic() < ends:
            time.sleep(0.01)
        late = pairs()
        deadline.attach(late)
        assert cut_after(late) < SLACK


def test_many_requests_start_no_thread_of_their_own(pairs, watchdog, started_threads):
    def requests_of_one_thread() -> None:
        for _ in range(20):
            with RequestDeadline(30) as deadline:
                deadline.attach(pairs())
        with RequestDeadline(0.2) as last:
            sock = pairs()
            last.attach(sock)
            assert cut_after(sock) < SLACK

    workers = [threading.Thread(target=requests_of_one_thread, name="ours") for _ in range(4)]
    for worker in workers:
        worker.start()
    requests_of_one_thread()
    for worker in workers:
        worker.join(SLACK * 2)
    assert [name for name in started_threads if name != "ours"] == ["request-deadlines"]
    assert watchdog.watching() == 0


def test_a_deadline_begun_later_but_due_sooner_is_cut_first(pairs):
    with RequestDeadline(30) as outer:
        slow = pairs()
        outer.attach(slow)
        with RequestDeadline(0.2) as inner:
            quick = pairs()
            inner.attach(quick)
            assert cut_after(quick) < SLACK
        assert inner.expired and not outer.expired
        assert still_open(slow)


def test_nested_deadlines_each_take_the_connections_made_while_they_are_innermost(connect):
    with RequestDeadline(2.0) as outer:
        with RequestDeadline(0.2) as inner:
            assert cut_after(connect()) < SLACK
        assert inner.expired and not outer.expired
        # The inner one has ended: a connection made now is the outer one's.
        assert cut_after(connect()) < SLACK
        assert outer.expired
    with RequestDeadline(30) as fresh:
        sock = connect()
        assert still_open(sock) and not fresh.expired


def test_a_deadline_is_not_kept_once_its_block_ends(pairs, watchdog):
    deadline = RequestDeadline(30)
    with deadline:
        deadline.attach(pairs())
        assert watchdog.watching() == 1
    assert watchdog.watching() == 0
    gone = weakref.ref(deadline)
    del deadline
    gc.collect()
    assert gone() is None


def test_the_watchdog_ends_when_idle_and_a_later_deadline_starts_it_again(pairs, watchdog):
    watchdog.IDLE_SECONDS = 0.2
    with RequestDeadline(0.3):  # ended early: the thread finds it gone when it wakes
        first = watchdog._thread
        assert first is not None and first.is_alive()
    first.join(SLACK)
    assert not first.is_alive() and watchdog._thread is None
    with RequestDeadline(0.2) as deadline:
        sock = pairs()
        deadline.attach(sock)
        assert cut_after(sock) < SLACK
        assert watchdog._thread not in (None, first)


def test_a_forked_child_has_a_watchdog_of_its_own(pairs):
    with RequestDeadline(30):  # the parent's watchdog thread is running
        pid = os.fork()
        if pid == 0:  # the child: one thread, the parent's watchdog not among them
            code = 1
            try:
                with RequestDeadline(0.2) as deadline:
                    sock = pairs()
                    deadline.attach(sock)
                    code = 0 if cut_after(sock) < SLACK else 2
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# -- reused sessions -------------------------------------------------------------------------


class KeepAliveServer(RawServer):
    """Answers a connection's first request in full and keeps the connection open; every
    later request, on whichever connection, gets its headers, then a body trickled a byte
    at a time, never fast enough to finish nor slow enough for a read timeout."""

    TRICKLE_FOR = 30.0

    def __init__(self) -> None:
        self.requests = 0
        super().__init__("/file")

    def serve(self, conn: socket.socket) -> None:
        while read_head(conn) is not None:
            self.requests += 1
            if self.requests == 1:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                continue
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            ends = time.monotonic() + self.TRICKLE_FOR
            while time.monotonic() < ends and not self.stopping.wait(0.2):
                conn.sendall(b".")
            return


@pytest.fixture
def keep_alive_server():
    server = KeepAliveServer()
    yield server
    server.close(SLACK)


def test_a_reused_session_connects_anew_under_each_requests_deadline(keep_alive_server):
    """Its first answer read in full, urllib3 would keep the connection for the next request,
    a socket the next request's deadline never saw."""
    server = keep_alive_server
    judged = pinned.judged(server.url, allow_loopback=True)
    with judged, transport.strict_session(requests.Session()) as session:
        with RequestDeadline(SLACK):
            assert session.get(server.url, timeout=SLACK).content == b"ok"
        started = time.monotonic()
        with RequestDeadline(0.5) as deadline, pytest.raises(requests.RequestException):
            session.get(server.url, timeout=SLACK)
        assert deadline.expired
        assert time.monotonic() - started < SLACK
    assert (server.connections, server.requests) == (2, 2)


# -- the sender: what session.request would send ---------------------------------------------


def _sessions() -> dict[str, requests.Session]:
    plain = transport.strict_session(requests.Session())
    cookies = transport.strict_session(requests.Session())
    cookies.cookies.set("here", "1", domain="127.0.0.1", path="/")
    cookies.cookies.set("elsewhere", "2", domain="example.org", path="/")
    cookies.cookies.set("deeper", "3", domain="127.0.0.1", path="/other")
    dressed = transport.strict_session(requests.Session())
    dressed.headers.update({"X-Extra": "yes", "Accept-Encoding": None, "User-Agent": "ours"})
    dressed.params = {"token": "t", "list": ["a", "b"]}
    dressed.auth = ("user", "secret")
    dressed.proxies = {"ftp": "http://127.0.0.1:9"}
    dressed.hooks["response"].append(lambda r, *args, **kwargs: r)
    dressed.verify = False
    return {"plain": plain, "cookies": cookies, "dressed": dressed}


def _sent(session: requests.Session, call) -> tuple:
    """What ``call`` hands ``session.send``: the prepared request, seen whole, and options."""
    seen: list = []

    def send(prepared, **options):
        seen.append((prepared, options))
        raise _Stop

    session.send = send  # type: ignore[method-assign]
    try:
        with pytest.raises(_Stop):
            call()
    finally:
        del session.send
    [(prepared, options)] = seen
    return (
        prepared.method,
        prepared.url,
        list(prepared.headers.items()),
        prepared.body,
        prepared._body_position,
        {event: list(hooks) for event, hooks in prepared.hooks.items()},
        sorted((c.domain, c.path, c.name, c.value) for c in prepared._cookies),
        options,
    )


class _Stop(Exception):
    pass


@pytest.mark.parametrize("name", ["plain", "cookies", "dressed"])
@pytest.mark.parametrize("method", ["GET", "HEAD", "post"])
@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/a/file.bin?x=1&y=%20z", "http://127.0.0.1/other/b c"]
)
def test_a_sender_hands_send_what_session_request_would(name, method, url):
    session = _sessions()[name]
    headers = {"Accept-Encoding": "identity", "X-Ours": "1"}
    sender = transport.Sender(session, headers)
    timeout = (3.0, 7.0)
    ours = _sent(session, lambda: sender.request(method, url, timeout=timeout))
    theirs = _sent(
        session,
        lambda: session.request(
            method, url, headers=headers, stream=True, allow_redirects=False, timeout=timeout
        ),
    )
    assert ours == theirs


def test_a_sender_keeps_the_cookies_a_server_sets_until_told_to_forget_them(http_server):
    def login(rec):
        return Reply(200, b"in", {"Set-Cookie": "session=abc; Path=/"})

    url = http_server.behave("/login", handler=login)
    session = transport.strict_session(requests.Session())
    session.cookies.set("made", "with", domain="127.0.0.1", path="/")
    sender = transport.Sender(session, {})
    with pinned.judged(url, allow_loopback=True):
        sender.request("GET", url, timeout=SLACK).close()
        sender.request("GET", url, timeout=SLACK).close()
        sender.forget_cookies()
        sender.request("GET", url, timeout=SLACK).close()
    cookies = [r.headers.get("cookie") for r in http_server.requests]
    assert cookies == ["made=with", "made=with; session=abc", "made=with"]


def test_a_sender_refuses_a_session_that_trusts_the_environment():
    with pytest.raises(ValueError, match="strict_session"):
        transport.Sender(requests.Session(), {})
