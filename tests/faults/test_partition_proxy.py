"""The partition proxy (``tests/partition.py``) against an echo server on loopback: it
forwards, goes silent both ways without closing anything, and forwards again once healed."""

from __future__ import annotations

import socket
import threading

import pytest

from tests.partition import Partition


@pytest.fixture
def echo():
    """An echo server on 127.0.0.1; its address as ``host:port``."""
    server = socket.create_server(("127.0.0.1", 0))

    def echo_one(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed at the end of the test
                return
            threading.Thread(target=echo_one, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.fixture
def proxy(echo):
    p = Partition(echo)
    yield p
    p.close()


def connect(proxy: Partition) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", proxy.port))
    conn.settimeout(0.5)
    return conn


def silent(conn: socket.socket) -> bool:
    """Neither an answer nor a close within the time-out."""
    try:
        conn.recv(1024)
    except TimeoutError:
        return True
    return False


def test_forwards_until_blackholed_then_drops_both_ways_without_closing(proxy):
    conn = connect(proxy)
    conn.sendall(b"ping")
    assert conn.recv(1024) == b"ping"
    proxy.blackhole()
    conn.sendall(b"lost")
    assert silent(conn)  # no answer, and no FIN or RST either
    assert proxy.dropped >= len(b"lost")


def test_heal_forwards_again_on_the_same_connection(proxy):
    conn = connect(proxy)
    # Through to the server before the cut: the kernel accepts a connection before the
    # proxy does, and one the proxy takes during the cut is one "opened during the cut".
    conn.sendall(b"ping")
    assert conn.recv(1024) == b"ping"
    proxy.blackhole()
    conn.sendall(b"lost")
    assert silent(conn)
    proxy.heal()
    conn.sendall(b"back")
    assert conn.recv(1024) == b"back"  # what was dropped stays dropped


def test_a_connection_opened_during_the_cut_is_silent_then_closed_at_the_heal(proxy):
    proxy.blackhole()
    conn = connect(proxy)
    conn.sendall(b"hello")
    assert silent(conn)
    proxy.heal()
    assert conn.recv(1024) == b""  # the close the network held back
    fresh = connect(proxy)
    fresh.sendall(b"hello")
    assert fresh.recv(1024) == b"hello"


def test_refuses_a_target_off_loopback():
    with pytest.raises(ValueError, match="loopback"):
        Partition("192.0.2.1:2181")
