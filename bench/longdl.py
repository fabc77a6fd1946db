"""``bench latency``'s long-download scenario: every normal worker inside a long, slow download,
then one-file deposits, one after the other.

The long downloads are a batch of as many large files (``BIG`` bytes, over
``MQ_SMALL_JOB_BYTES``) as there are normal workers, served from 127.0.0.1 (the host the sample
file comes from too) a little at a time, so that each download holds its worker and never ends
while the scenario runs, yet never goes quiet long enough for a read timeout. The scenario waits
until every normal worker is inside one. Each deposit is given ``BENCH_LATENCY_LONGDL_TIMEOUT``
seconds: on a queue without reserved capacity it waits for a download to end, so the first one
past that ends the scenario, and the run reports how many timed out.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from bench.common import FILE_MANIFEST_HEADER, emit, submit_manifest
from harness.httpserver import HttpServer

BIG = 200_000_000
TRICKLE = 4096  # bytes every TRICKLE_SECONDS
TRICKLE_SECONDS = 0.5
WAIT_HELD = 180.0


class SlowServer:
    """Large files served a trickle at a time until the server stops."""

    def __init__(self, root: Path, n: int) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.server = HttpServer(root).start()
        self.stopping = threading.Event()
        self.gets = 0
        self.names = [f"long-{i}.bin" for i in range(n)]
        for name in self.names:
            self.server.behave(f"/{name}", generate=(BIG, self._chunks))
        # The digest a manifest must give: the files never finish, so any well-formed one.
        md5 = hashlib.md5(b"never finished", usedforsecurity=False).hexdigest()
        rows = [
            f"{self.server.url}/{name} | md5 | {md5} | {BIG} |  | {name} |  |  "
            f"| bench | long download {i} | 2024-01-01\n"
            for i, name in enumerate(self.names)
        ]
        (root / "long.checkm").write_text(FILE_MANIFEST_HEADER + "".join(rows) + "#%eof\n")
        self.manifest_url = self.server.url_for("/long.checkm")

    def _chunks(self):
        self.gets += 1
        sent = 0
        while sent + TRICKLE < BIG and not self.stopping.wait(TRICKLE_SECONDS):
            yield b"\0" * TRICKLE
            sent += TRICKLE

    def stop(self) -> None:
        self.stopping.set()
        self.server.stop()


def hold_every_worker(part: str, env: dict, store, slow: SlowServer, workers: int) -> str:
    """Submit the long downloads; once every normal worker is inside one, their batch id."""
    bid = submit_manifest(part, env, slow.manifest_url)
    deadline = time.perf_counter() + WAIT_HELD
    while time.perf_counter() < deadline:
        held = _downloading(store, bid)
        if held >= workers and slow.gets >= workers:
            emit(part, event="longdl_held", bid=bid, downloads=held, workers=workers)
            return bid
        time.sleep(0.1)
    raise SystemExit(f"bench {part}: the long downloads never held {workers} workers")


def still_held(store, bid: str, workers: int) -> bool:
    return _downloading(store, bid) >= workers


def _downloading(store, bid: str) -> int:
    jids = [j for group in store.batches.batch_jobs(bid).values() for j in group]
    jobs = [store.jobs.get_job(j) for j in jids]
    return sum(1 for j in jobs if j.status == "Downloading" and j.locked)
