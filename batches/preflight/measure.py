"""The sizes of a bounded sample of a manifest's URLs, asked by HEAD.

Depositors' URLs are untrusted: each HEAD goes through the site's fetcher
(``pipeline.services.door_fetcher``), so every hop is judged by the network policy and
connected only at the addresses judged (``services.pinned``). A host whose content breaker
is open is not asked; the breakers are only read, never counted: a pre-flight is no
download, and its failures must not hold back the jobs of that host. All the HEADs together
take at most ``MQ_PREFLIGHT_SECONDS``; each URL's failure is reported in its entry, never
raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import requests
from django.conf import settings

from merritt_queue.core.manifests import ManifestRow
from merritt_queue.deposit.manifestcheck import safe_value
from merritt_queue.project.breakerboard import policy
from merritt_queue.project.runtime import get_store
from merritt_queue.services import httputil
from merritt_queue.services.breakerguard import host_of
from merritt_queue.services.breakers import Breakers
from merritt_queue.services.errors import ServiceError
from merritt_queue.services.fetchchecks import content_length
from merritt_queue.services.transport import RequestDeadline
from pipeline.services import door_fetcher

log = logging.getLogger(__name__)

# One HEAD's longest wait: a size is a hint, and a person waits for the page.
PER_HEAD = 5.0
THREADS = 4
# How long a page waits for ZooKeeper to read the breakers before it asks without them.
BREAKER_WAIT = 2.0
BREAKER_OPEN = (
    "not tried: its host is marked unreachable (its circuit breaker is open); "
    "the download would wait for it"
)


def pick(rows: Sequence[ManifestRow], size: int) -> list[ManifestRow]:
    """At most ``size`` rows of distinct URLs, spread evenly over the manifest: a batch's
    first rows are often its smallest or its test files."""
    first: dict[str, ManifestRow] = {}
    for row in rows:
        first.setdefault(row.url, row)
    unique = list(first.values())
    if size <= 0 or not unique:
        return []
    if len(unique) <= size:
        return unique
    return [unique[i * len(unique) // size] for i in range(size)]


def sample(rows: Sequence[ManifestRow], size: int, seconds: float) -> list[dict]:
    picked = pick(rows, size) if seconds > 0 else []
    if not picked:
        return []
    blocked = open_breakers({host_of(row.url) for row in picked})
    fetcher = door_fetcher(min(PER_HEAD, seconds))
    ends = time.monotonic() + seconds

    def one(row: ManifestRow) -> dict:
        return _head(fetcher, row, ends, seconds, blocked)

    with ThreadPoolExecutor(min(THREADS, len(picked)), thread_name_prefix="preflight") as pool:
        return list(pool.map(one, picked))


def _head(fetcher, row: ManifestRow, ends: float, seconds: float, blocked: set[str]) -> dict:
    entry: dict = {"line": row.line, "url": safe_value(row.url), "status": None}
    entry |= {"bytes": None, "ms": 0, "error": None}
    left = ends - time.monotonic()
    if host_of(row.url) in blocked:
        entry["error"] = BREAKER_OPEN
        return entry
    if left <= 0:
        entry["error"] = f"not tried: the pre-flight's {seconds:g} s were spent"
        return entry
    bound = min(PER_HEAD, left)
    began = time.monotonic()
    deadline = RequestDeadline(bound)
    try:
        with deadline, closing(fetcher.head(row.url)) as resp:
            entry["status"] = resp.status_code
            if resp.status_code == 200:
                entry["bytes"] = content_length(resp)
            else:
                entry["error"] = f"answered {httputil.status_text(resp)}"
    except Exception as exc:  # a size is a hint: every failure is this URL's entry
        if deadline.expired or isinstance(exc, requests.Timeout):
            entry["error"] = f"no answer within {round(bound, 1):g} s"
        else:
            entry["error"] = safe_value(_words(exc))
    entry["ms"] = round((time.monotonic() - began) * 1000)
    return entry


def _words(exc: Exception) -> str:
    if isinstance(exc, ServiceError):
        return exc.message
    if isinstance(exc, requests.RequestException):
        return httputil.describe(exc)
    return str(exc) or type(exc).__name__


def open_breakers(hosts: set[str]) -> set[str]:
    """The hosts whose content breaker is open; none when the breakers are off or
    ZooKeeper does not answer soon (the HEADs are then simply made)."""
    if settings.MQ_BREAKER_THRESHOLD <= 0 or not hosts:
        return set()
    try:
        client = get_store(init=False, connected_within=BREAKER_WAIT).client
        board = Breakers(lambda: client, policy())
        return {h for h in hosts if board.read(f"content:{h}").is_open}
    except Exception as exc:  # the summary goes on without them, and says nothing false
        log.info("pre-flight: the content breakers could not be read: %s", exc)
        return set()
