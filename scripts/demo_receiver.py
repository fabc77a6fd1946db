#!/usr/bin/env python3
"""A depositor's notification receiver, for the demo: what a depositor would run.

It uses nothing of merritt-queue (the standard library only) and does exactly what
docs/usage.md tells receivers to do, in that order: the timestamp header is Unix seconds
written as ASCII digits only (no sign, space, fraction or exponent, at most ten digits) and
within ``TOLERANCE`` of this machine's clock; the subscription header names its own
subscription; the signature is ``v2=`` and the hex HMAC-SHA256, with its subscription's
secret, of ``v2:<timestamp>:<delivery id>:<subscription id>:<body>``, compared in constant
time; and each delivery id is taken once (a repeat is answered 200 and not taken again: a
retry whose answer was lost, or a replay). Ids are kept for twice the window, longer than a
replay's timestamp stays acceptable. ``--secret-file`` holds one line, ``<subscription id>
<secret>`` (read at each request, so the demo may write it after the receiver starts).
Each event taken is one JSON line of ``--log``. ``--fail-first N`` answers 503 to the first N
deliveries, so that the demo shows a retry.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import re
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TOLERANCE = 300  # seconds a signature's timestamp may differ from this machine's clock
KEEP_IDS = 2 * TOLERANCE
MAX_BODY = 1 << 20
TIMESTAMP = re.compile(r"[0-9]{1,10}")


def parse_timestamp(text: str) -> int | None:
    """The header's seconds, or None unless written exactly as the docs say."""
    return int(text) if TIMESTAMP.fullmatch(text) else None


def verify(
    subscription: str, secret: str, headers, body: bytes, now: float | None = None
) -> str | None:
    """Why the delivery is refused, or None when it is the queue's, for this subscription."""
    stamp = parse_timestamp(headers.get("X-Merritt-Queue-Timestamp", ""))
    if stamp is None:
        return "timestamp not written as Unix seconds"
    if abs((time.time() if now is None else now) - stamp) > TOLERANCE:
        return "timestamp outside the window"
    if headers.get("X-Merritt-Queue-Subscription", "") != subscription:
        return "not this receiver's subscription"
    delivery = headers.get("X-Merritt-Queue-Delivery", "")
    signed = f"v2:{stamp}:{delivery}:{subscription}:".encode() + body
    mac = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(f"v2={mac}", headers.get("X-Merritt-Queue-Signature", "")):
        return "bad signature"
    return None


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, secret_file: Path, log: Path, fail_first: int) -> None:
        super().__init__(address, Handler)
        self.secret_file, self.log, self.fail_first = secret_file, log, fail_first
        self.lock = threading.Lock()
        self.seen: dict[str, float] = {}  # delivery id: when it was taken
        self.count = 0

    def credentials(self) -> tuple[str, str]:
        """This receiver's subscription id and secret; empty when the file is not written."""
        try:
            words = self.secret_file.read_text().split()
        except FileNotFoundError:
            return "", ""
        return (words[0], words[1]) if len(words) == 2 else ("", "")

    def first_time(self, delivery: str) -> bool:
        """Whether ``delivery`` was not taken within ``KEEP_IDS``; it is taken from now on."""
        now = time.monotonic()
        self.seen = {d: at for d, at in self.seen.items() if now - at <= KEEP_IDS}
        if delivery in self.seen:
            return False
        self.seen[delivery] = now
        return True

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
        subscription, secret = self.server.credentials()
        refused = (
            "no secret yet" if not secret else verify(subscription, secret, self.headers, body)
        )
        if refused:
            self.server.write({"delivery_id": delivery, "refused": refused})
            return self.answer(401, refused)
        with self.server.lock:
            self.server.count += 1
            failing = self.server.count <= self.server.fail_first
            repeat = not failing and not self.server.first_time(delivery)
        if failing:
            self.server.write({"delivery_id": delivery, "answered": "503 (on purpose)"})
            return self.answer(503, "failing on purpose, try again")
        if repeat:
            self.server.write({"delivery_id": delivery, "repeat": True})
            return self.answer(200, "already taken")
        event = json.loads(body).get("event", {})
        self.server.write({"delivery_id": delivery, "event": event})
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
