#!/usr/bin/env python3
"""A depositor's notification receiver, for the demo: what a depositor would run.

It uses nothing of merritt-queue (the standard library only). For each POST it checks the
signature (HMAC-SHA256 of ``timestamp + "." + body`` with the profile's secret, read from
``--secret-file`` at each request) and the timestamp's age, drops a delivery id it has already
taken (a retry whose answer was lost), and appends one JSON line per event to ``--log``.
``--fail-first N`` answers 503 to the first N deliveries, so that the demo shows a retry.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TOLERANCE = 300  # seconds a signature's timestamp may differ from this machine's clock
MAX_BODY = 1 << 20


def verify(secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    try:
        stamp = int(timestamp)
    except ValueError:
        return False
    if abs(time.time() - stamp) > TOLERANCE:
        return False
    mac = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256)
    return hmac.compare_digest(f"sha256={mac.hexdigest()}", signature)


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, secret_file: Path, log: Path, fail_first: int) -> None:
        super().__init__(address, Handler)
        self.secret_file, self.log, self.fail_first = secret_file, log, fail_first
        self.lock = threading.Lock()
        self.seen: set[str] = set()
        self.count = 0

    def write(self, entry: dict) -> None:
        entry = {"received": datetime.now(UTC).isoformat(timespec="seconds"), **entry}
        with self.lock, self.log.open("a") as out:
            out.write(json.dumps(entry, sort_keys=True) + "\n")


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.answer(413, "too large")
        body = self.rfile.read(length)
        delivery = self.headers.get("X-Merritt-Queue-Delivery", "")
        secret = self.server.secret_file.read_text().strip()
        if not verify(
            secret,
            self.headers.get("X-Merritt-Queue-Timestamp", ""),
            body,
            self.headers.get("X-Merritt-Queue-Signature", ""),
        ):
            self.server.write({"delivery_id": delivery, "refused": "bad signature or timestamp"})
            return self.answer(401, "bad signature")
        with self.server.lock:
            self.server.count += 1
            failing = self.server.count <= self.server.fail_first
            repeat = delivery in self.server.seen
            if not failing:
                self.server.seen.add(delivery)
        if failing:
            self.server.write({"delivery_id": delivery, "answered": "503 (on purpose)"})
            return self.answer(503, "failing on purpose, try again")
        event = json.loads(body).get("event", {})
        self.server.write({"delivery_id": delivery, "repeat": repeat, "event": event})
        self.answer(200, "ok")

    def answer(self, status: int, text: str) -> None:
        data = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # the event log says it all
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8002)
    parser.add_argument("--secret-file", type=Path, default=Path("var/run/demo-receiver.secret"))
    parser.add_argument("--log", type=Path, default=Path("var/log/receiver-events.log"))
    parser.add_argument("--fail-first", type=int, default=0)
    opts = parser.parse_args()
    opts.log.parent.mkdir(parents=True, exist_ok=True)
    server = Receiver(("127.0.0.1", opts.port), opts.secret_file, opts.log, opts.fail_first)
    print(f"receiving on http://127.0.0.1:{opts.port}/, events to {opts.log}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
