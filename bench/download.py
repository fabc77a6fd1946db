"""One big download: our Downloading step's core against curl, from the same local server.

Set-up (untimed), under a fresh ``var/bench/tmp-download-<uuid>`` removed at the end: one file
of ``BENCH_DOWNLOAD_MB`` MiB (default 1024), a 16 MiB random block repeated (not zeros, so
nothing along the way can shortcut it), its md5 computed while writing it; a threaded HTTP
server on 127.0.0.1 in this process that sends it with ``os.sendfile`` (the kernel copies,
so the server limits neither client).

Then ``ROUNDS`` rounds, each running both sides once (the side that goes first alternates):

- curl: ``curl -s -o <dest> <url>``, timed around the process;
- curl+md5sum: ``curl -s <url> | tee <dest> | md5sum``, the same work as ours (the file
  kept and its md5 checked) with the usual tools, timed around the pipeline;
- ours: a fresh Python process (so its peak RSS is its own) runs
  ``Fetcher(allow_loopback=True).download(url, dest, expected_size=size, digest=("md5", md5))``
  as the Downloading step does: streaming to ``<dest>.part``, computing the md5, checking
  size and digest, fsync, rename. It times the call itself and reports its elapsed seconds
  and its peak memory (``VmHWM``);
- ours, no digest: the same with no digest supplied (a deposit without one), so nothing
  is hashed: the transfer, the size check and the fsync alone.

Each download is deleted right after it is timed. Summary (MB = 2**20 bytes): medians
``ours_mb_per_s`` and ``curl_mb_per_s``, ``ratio = ours / curl`` (target >= 0.8) and
``peak_rss_mb``, the highest of our runs (target < 100); then ``curl_md5sum_mb_per_s``,
``ratio_md5sum = ours / curl+md5sum`` and ``md5_mb_per_s``, hashlib's md5 over the same
number of bytes in memory: no download that checks an md5 can beat it, and on a machine
where it is below 0.8 x curl the target ratio cannot be met while checking the digest;
``write_mb_per_s``, the same bytes written from memory to a file and fsynced (the median
of 3): every side that keeps the file pays for these writes, and on a virtual machine that
hands freed memory back to its host they cost several times more than elsewhere;
``no_digest_mb_per_s`` and ``ratio_no_digest`` show the download without it.
Below the target ratio, our side is run once more under cProfile on a ``PROFILE_MB`` file,
and where its time goes is printed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.common import REPO_ROOT, RESULTS_DIR, emit, env_int, summary, timer

PART = "download"
DEFAULT_MB = 1024
ROUNDS = 3
BLOCK = 16 << 20
MB = 1 << 20
TARGET_RATIO = 0.8
TARGET_RSS_MB = 100
PROFILE_MB = 256
PROFILE_TOP = 15

# Our side, in a fresh interpreter: argv = url dest size md5|- [profile-output]; "-": the
# depositor supplied no digest, so none is computed. Its peak is VmHWM, the high-water mark
# of its own memory: ru_maxrss survives exec and so reports the bench process's peak when
# that is higher (a child of a 211 MB parent read 211 MB there, 11 MB in VmHWM).
OURS = """
import json, sys, time
from pathlib import Path
from merritt_queue.services.fetch import Fetcher

url, dest, size, md5 = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fetcher = Fetcher(allow_loopback=True)
digest = None if md5 == "-" else ("md5", md5)
call = lambda: fetcher.download(url, dest, expected_size=size, digest=digest)
profiler = None
if len(sys.argv) > 5:
    import cProfile
    profiler = cProfile.Profile()
start = time.perf_counter()
result = profiler.runcall(call) if profiler else call()
seconds = time.perf_counter() - start
if profiler:
    profiler.dump_stats(sys.argv[5])
assert result.size == size and result.digests.get("md5", "-") == md5, result
print(json.dumps({
    "seconds": seconds,
    "peak_kib": int(next(
        line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")
    )),
}))
"""


def run(args) -> None:
    size_mb = env_int(PART, "BENCH_DOWNLOAD_MB", DEFAULT_MB)
    curl = shutil.which("curl")
    if curl is None:
        raise SystemExit(
            f"bench {PART}: curl is not installed; it is the yardstick of this part. "
            "Install it with: sudo apt-get install -y curl"
        )
    tmp = RESULTS_DIR / f"tmp-{PART}-{uuid.uuid4().hex}"
    server = None
    try:
        tmp.mkdir(parents=True)
        with timer() as setup:
            source = tmp / "source.bin"
            md5 = make_file(source, size_mb * MB)
            server = FileServer(source)
        version = subprocess.run([curl, "--version"], capture_output=True, text=True).stdout
        emit(
            PART,
            event="setup",
            size_mb=size_mb,
            seconds=round(setup.elapsed, 3),
            url=server.url,
            curl=version.split("\n", 1)[0],
            python=sys.version.split()[0],
        )
        rates, rss = _rounds(server.url, tmp, size_mb * MB, md5, curl)
        median = {side: statistics.median(got) for side, got in rates.items()}
        ours_rate, curl_rate, piped_rate = median["ours"], median["curl"], median["curl+md5sum"]
        ratio = ours_rate / curl_rate
        md5_rate = _md5_rate(size_mb * MB)
        write_rate = _write_rate(tmp / "write.bin", size_mb * MB)
        peak_rss = max(rss)
        if ratio < TARGET_RATIO:
            _profile(tmp, server)
        if peak_rss >= TARGET_RSS_MB:
            emit(PART, event="above_target", peak_rss_mb=peak_rss, target=TARGET_RSS_MB)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    summary(
        PART,
        ours_mb_per_s=ours_rate,
        curl_mb_per_s=curl_rate,
        ratio=ratio,
        peak_rss_mb=peak_rss,
        curl_md5sum_mb_per_s=piped_rate,
        ratio_md5sum=ours_rate / piped_rate,
        md5_mb_per_s=md5_rate,
        write_mb_per_s=write_rate,
        no_digest_mb_per_s=median["ours, no digest"],
        ratio_no_digest=median["ours, no digest"] / curl_rate,
    )


def _md5_rate(size: int) -> float:
    """MB/s of hashlib's md5 over ``size`` bytes already in memory (the best of 3)."""
    block, blocks = os.urandom(BLOCK), max(1, size // BLOCK)
    best = 0.0
    for _ in range(3):
        with timer() as elapsed:
            md5 = hashlib.md5(usedforsecurity=False)
            for _ in range(blocks):
                md5.update(block)
        best = max(best, blocks * BLOCK / MB / elapsed.elapsed)
    return best


def _write_rate(path: Path, size: int) -> float:
    """MB/s of writing ``size`` bytes from memory to ``path`` and fsyncing it (the median of
    3, the file deleted after each): what keeping the file costs every side that keeps it."""
    block = os.urandom(BLOCK)
    rates = []
    for _ in range(3):
        with timer() as elapsed:
            _fill(path, size, block)
        path.unlink()
        rates.append(size / MB / elapsed.elapsed)
    return statistics.median(rates)


def make_file(path: Path, size: int) -> str:
    """Write ``size`` bytes (one random block over and over) to ``path``; their md5."""
    md5 = hashlib.md5(usedforsecurity=False)
    # Fsynced, else its writeback competes with the first timed runs.
    _fill(path, size, os.urandom(BLOCK), md5.update)
    return md5.hexdigest()


def _fill(path: Path, size: int, block: bytes, seen: Callable[[bytes], None] | None = None) -> None:
    """Write ``size`` bytes of ``block`` over and over to ``path`` and fsync it; ``seen`` is
    given each piece as it is written."""
    with open(path, "wb") as out:
        left = size
        while left:
            piece = block[: min(left, BLOCK)]
            out.write(piece)
            if seen is not None:
                seen(piece)
            left -= len(piece)
        out.flush()
        os.fsync(out.fileno())


class _FileHandler(BaseHTTPRequestHandler):
    """GET (and HEAD) of any path answers the server's one file, sent by the kernel."""

    def do_HEAD(self) -> None:
        self._headers()

    def do_GET(self) -> None:
        size = self._headers()
        with open(self.server.path, "rb") as f:  # type: ignore[attr-defined]
            offset = 0
            out = self.connection.fileno()
            try:
                while offset < size:
                    sent = os.sendfile(out, f.fileno(), offset, size - offset)
                    if sent == 0:
                        break
                    offset += sent
            except (BrokenPipeError, ConnectionResetError):  # the client went away
                pass

    def _headers(self) -> int:
        size = self.server.path.stat().st_size  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        self.wfile.flush()
        return size

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass


class FileServer:
    def __init__(self, path: Path) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FileHandler)
        self.httpd.daemon_threads = True
        self.httpd.path = path  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/{path.name}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, path: Path) -> str:
        """Serve ``path`` from now on; its URL."""
        self.httpd.path = path  # type: ignore[attr-defined]
        return self.url.rsplit("/", 1)[0] + "/" + path.name

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _rounds(url: str, tmp: Path, size: int, md5: str, curl: str):
    """Every side ``ROUNDS`` times: the MB/s of each side per round, and our peak RSS in MB
    per run."""
    dest = tmp / "dest.bin"
    rss: list[float] = []

    def ours(digest: str) -> tuple[float, dict]:
        got = _ours(url, dest, size, digest)
        rss.append(got["peak_kib"] / 1024)
        return got["seconds"], {"peak_rss_mb": round(rss[-1], 1)}

    # Each side: its seconds and what else its line shows.
    sides = {
        "curl": lambda: (_curl(curl, url, dest, size), {}),
        "ours": lambda: ours(md5),
        "curl+md5sum": lambda: (_curl_md5sum(curl, url, dest, size, md5), {}),
        "ours, no digest": lambda: ours("-"),
    }
    rates: dict[str, list[float]] = {side: [] for side in sides}
    for k in range(1, ROUNDS + 1):
        for side in list(sides) if k % 2 else reversed(sides):
            seconds, shown = sides[side]()
            rates[side].append(size / MB / seconds)
            dest.unlink(missing_ok=True)
            emit(
                PART,
                event="run",
                round=k,
                side=side,
                seconds=round(seconds, 3),
                mb_per_s=round(rates[side][-1], 1),
                **shown,
            )
    return rates, rss


def _curl_md5sum(curl: str, url: str, dest: Path, size: int, md5: str) -> float:
    script = 'set -o pipefail; "$1" -s -S "$2" | tee "$3" | md5sum'
    start = time.perf_counter()
    done = subprocess.run(
        ["bash", "-c", script, "bash", curl, url, str(dest)], capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench {PART}: curl | md5sum failed: {done.stderr}")
    if done.stdout.split()[0] != md5 or dest.stat().st_size != size:
        raise SystemExit(f"bench {PART}: curl | md5sum got {done.stdout.strip()}, not {md5}")
    return seconds


def _curl(curl: str, url: str, dest: Path, size: int) -> float:
    start = time.perf_counter()
    done = subprocess.run([curl, "-s", "-S", "-o", str(dest), url], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench {PART}: curl failed (exit {done.returncode}): {done.stderr}")
    got = dest.stat().st_size
    if got != size:
        raise SystemExit(f"bench {PART}: curl wrote {got} bytes, expected {size}")
    return seconds


def _ours(url: str, dest: Path, size: int, md5: str, *extra: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", OURS, url, str(dest), str(size), md5, *extra],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"bench {PART}: our download failed (exit {done.returncode}):\n"
            f"{done.stdout}{done.stderr}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _profile(tmp: Path, server: FileServer) -> None:
    """Our side once more under cProfile, on a smaller file; the top functions by own time."""
    import pstats

    source = tmp / "profile.bin"
    size = PROFILE_MB * MB
    md5 = make_file(source, size)
    url = server.serve(source)
    dest = tmp / "profile-dest.bin"
    stats_path = tmp / "profile.pstats"
    try:
        got = _ours(url, dest, size, md5, str(stats_path))
    finally:
        dest.unlink(missing_ok=True)
    stats = pstats.Stats(str(stats_path))
    total = got["seconds"]
    rows = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)  # type: ignore[attr-defined]
    emit(
        PART,
        event="profile",
        size_mb=PROFILE_MB,
        seconds=round(total, 3),
        mb_per_s=round(PROFILE_MB / total, 1),
    )
    for (filename, line, name), (_cc, calls, own, cumulative, _callers) in rows[:PROFILE_TOP]:
        emit(
            PART,
            event="profile_row",
            function=f"{Path(filename).name}:{line}({name})" if line else name,
            calls=calls,
            own_s=round(own, 3),
            own_share=round(own / total, 3),
            cumulative_s=round(cumulative, 3),
        )
