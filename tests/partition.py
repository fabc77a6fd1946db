"""A TCP proxy on loopback that can cut one process's link to a server without closing it.

A process pointed at ``Partition(target).hosts`` instead of ``target`` reaches the server
through the proxy. ``blackhole()`` makes the link go silent both ways, as a network that
drops every packet does: the sockets stay open, nothing is reset or closed, every byte
either side sends is read and thrown away, and a connection opened meanwhile is accepted
but never reaches the server (its first bytes are lost like a SYN would be). ``heal()``
forwards again. The process notices only through its own timeouts, which is the point:
ZooKeeper's client goes SUSPENDED when its pings go unanswered, the server expires the
session, and only once the link heals does the client learn it was LOST.

Unlike a real network, what was dropped is not retransmitted after the heal: a connection
that lived through a blackhole may carry a broken stream, which ZooKeeper's client and
server drop (an answer missing, a frame cut short), so the client reconnects on a fresh
connection as it would after a read time-out. A connection opened during the blackhole,
and one whose other end closed meanwhile, is closed at the heal: the close that the
network held back arrives then.

Loopback only: the proxy listens on 127.0.0.1 and refuses any other target.
"""

from __future__ import annotations

import selectors
import socket
import threading
from dataclasses import dataclass

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(eq=False)
class _Link:
    """One accepted connection and, unless it came during a blackhole, its upstream."""

    client: socket.socket
    server: socket.socket | None
    ended: bool = False  # one end closed while the link was cut: close both at the heal

    def other(self, sock: socket.socket) -> socket.socket | None:
        return self.server if sock is self.client else self.client


class Partition:
    """Forwards ``127.0.0.1:<port>`` to ``target`` (``host:port`` on loopback), one thread."""

    def __init__(self, target: str) -> None:
        host, _, port = target.split(",")[0].rpartition(":")
        if host not in LOOPBACK:
            raise ValueError(f"the partition proxy only forwards to loopback, not {target!r}")
        self.target = (host, int(port))
        self.dropped = 0  # bytes thrown away while cut, both ways
        self.accepted = 0
        self._cut = False
        self._heal_due = False
        self._links: dict[socket.socket, _Link] = {}  # by each socket still read from
        self._open: list[_Link] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sel = selectors.DefaultSelector()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ)
        self.port = self._listener.getsockname()[1]
        self.hosts = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._run, name="partition-proxy", daemon=True)
        self._thread.start()

    @property
    def cut(self) -> bool:
        return self._cut

    def blackhole(self) -> None:
        with self._lock:
            self._cut = True
            self._heal_due = False

    def heal(self) -> None:
        with self._lock:
            self._cut = False
            self._heal_due = True

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for link in list(self._open):
            self._close(link)
        self._sel.close()
        self._listener.close()

    # --- the loop ------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                heal, self._heal_due = self._heal_due, False
            if heal:
                self._close_held_back()
            for key, _ in self._sel.select(timeout=0.05):
                sock = key.fileobj
                if sock is self._listener:
                    self._accept()
                elif sock in self._links:  # closed earlier in this round otherwise
                    self._pump(sock)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        self.accepted += 1
        server = None
        if not self._cut:
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()  # the server is down: refused, as it would be directly
                return
        link = _Link(client, server)
        self._open.append(link)
        for sock in (client, server):
            if sock is not None:
                sock.setblocking(True)
                self._links[sock] = link
                self._sel.register(sock, selectors.EVENT_READ)

    def _pump(self, sock: socket.socket) -> None:
        link = self._links[sock]
        try:
            data = sock.recv(1 << 16)
        except OSError:
            data = b""
        if self._cut:
            self.dropped += len(data)
            if not data:  # a close the network holds back until the heal
                link.ended = True
                self._forget(sock)
            return
        other = link.other(sock)
        if not data or other is None:
            self._close(link)
            return
        try:
            other.sendall(data)
        except OSError:
            self._close(link)

    def _close_held_back(self) -> None:
        """At the heal: what opened during the cut, or lost an end, is closed now."""
        for link in list(self._open):
            if link.server is None or link.ended:
                self._close(link)

    def _forget(self, sock: socket.socket) -> None:
        self._links.pop(sock, None)
        try:
            self._sel.unregister(sock)
        except (KeyError, ValueError):
            pass

    def _close(self, link: _Link) -> None:
        if link in self._open:
            self._open.remove(link)
        for sock in (link.client, link.server):
            if sock is not None:
                self._forget(sock)
                sock.close()
