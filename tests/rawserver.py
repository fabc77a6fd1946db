"""A raw HTTP server on 127.0.0.1 for what no honest server does: each connection is handed
to a subclass's ``serve`` on a thread of its own, to answer (or not) byte by byte."""

from __future__ import annotations

import socket
import threading


class RawServer:
    """Accepts connections until ``close``; ``connections`` counts them."""

    def __init__(self, path: str = "/payload.bin") -> None:
        self.connections = 0
        self.stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}{path}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.connections += 1
            threading.Thread(target=self._serve_one, args=(conn,), daemon=True).start()

    def _serve_one(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.serve(conn)
            except OSError:
                pass  # the client cut the connection: what a deadline does

    def close(self, wait: float = 5.0) -> None:
        self.stopping.set()
        self._thread.join(wait)
        self._listener.close()


def read_head(conn: socket.socket) -> bytes | None:
    """A request's line and headers; None when the client closes first."""
    head = b""
    while b"\r\n\r\n" not in head:
        data = conn.recv(65536)
        if not data:
            return None
        head += data
    return head
