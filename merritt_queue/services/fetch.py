"""Fetching depositor content over HTTP(S): size estimates, one download and many.

Guarantees:

- Every URL, and every redirect hop, passes ``netpolicy.check_url`` before any connection is
  made to it, and is connected to at the addresses that check judged, never at a second
  answer of the resolver (``pinned``); redirects are followed by hand, at most
  ``max_redirects`` of them. Once a hop was a public host, every later hop must be public
  too (see ``netpolicy``).
- ``dest`` appears only complete, verified and on the disk: bytes go to ``<dest>.part``, which
  is fsynced, then renamed onto ``dest`` after the size and digest checks pass, and removed
  on any error, an error of a helper thread included. A part file that vanished or was
  replaced meanwhile is ``PartFileGone`` (retryable), never a stored file.
- A fenced fetcher (``fenced``) asks its fence before writing each chunk and before the
  rename: a step that lost its lock stops there, and its error (``LockLost``) is raised as
  it is, never folded into a ``FetchError``.
- ``head_sizes`` never raises for one URL: an unknown or failed size is None. Each HEAD
  has a wall-clock limit of its own (``head_deadline``) from connect to last byte, and
  the whole call a few of them (``HEAD_BUDGET``).
- No request takes anything from the operator's environment: no ``~/.netrc`` credentials
  for a depositor's host, no proxy between us and the address the policy checked (see
  ``transport.strict_session``).

How one download's bytes are streamed, capped, retried and told to the step's log is
``fetchattempts``; how many run at once, ``fetchpool``.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

from ..core.errors import LockLost
from . import fetchattempts, fetchpool, httputil, pinned, transport
from . import fetchchecks as checks
from .errors import FetchError, PartFileGone
from .netpolicy import is_public
from .partfile import make_dir, part_path, rename_into_place, unlink_quietly
from .transport import RequestDeadline

log = logging.getLogger(__name__)

# A download's read and buffer size: small enough that a chunk read from the socket is still
# in the processor's cache when it is written and digested, big enough that the per-chunk
# work stays small. In side-by-side runs of ``bench download``, 4 MiB chunks were markedly
# slower; between 128 KiB and 1 MiB the differences were within a shared machine's noise.
CHUNK_SIZE = 256 << 10

# The HEADs of one ``head_sizes`` call share this many head deadlines in all.
HEAD_BUDGET = 4

# Content-Length then counts the bytes we store; a transparently gzipped body would not match.
_HEADERS = {"Accept-Encoding": "identity"}


@dataclass(frozen=True)
class DownloadResult:
    url: str
    path: Path
    size: int
    digests: dict[str, str]


@dataclass(frozen=True)
class DownloadItem:
    url: str
    dest: Path
    expected_size: int | None = None
    digest: tuple[str, str] | None = None


class Fetcher:
    """Downloads and size estimates under one network policy; safe to share between threads."""

    def __init__(
        self,
        timeout: float | tuple[float, float] = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_workers: int = 8,
        allow_loopback: bool = False,
        allow_private: bool = False,
        max_redirects: int = 5,
        chunk_size: int = CHUNK_SIZE,
        session_factory=requests.Session,
        deadline: float | None = None,
        head_deadline: float | None = None,
        max_download_bytes: int | None = None,
    ) -> None:
        if retries < 1:
            raise ValueError("retries is the number of attempts and must be at least 1")
        self.timeout = httputil.timeouts(timeout)
        self.retries = retries
        self.backoff = backoff
        self.max_workers = max_workers
        self.allow_loopback = allow_loopback
        self.allow_private = allow_private
        self.max_redirects = max_redirects
        self.chunk_size = chunk_size
        self.session_factory = session_factory
        self.deadline = deadline
        # A HEAD is a size estimate: it gets no more than one read timeout in all.
        self.head_deadline = head_deadline if head_deadline is not None else self.timeout[1]
        self.max_download_bytes = max_download_bytes
        # Whether max_download_bytes is what Estimating reserved for a file of undeclared size.
        self.undeclared_reserved = False
        self.declared_sizes: dict[str, int] = {}
        # Asked before each chunk is written and before the rename; raises to stop (``fenced``).
        self.fence: Callable[[str], None] | None = None
        # Each download's transfer goes through it, with its URL (``gated``).
        self.gate: Callable[[str, Callable[[], Any]], Any] | None = None
        # Each thread's session, shared with the copies ``with_declared_sizes`` makes.
        self._sessions = threading.local()

    def with_declared_sizes(
        self, sizes: Mapping[str, int | None], *, undeclared: int | None = None
    ) -> Fetcher:
        """A copy whose downloads of these URLs stop past these sizes (learned by HEAD), and
        those of undeclared size past ``undeclared``, what Estimating reserved for each."""
        bounded = copy.copy(self)
        bounded.declared_sizes = {u: n for u, n in sizes.items() if n is not None}
        if undeclared is not None and undeclared != self.max_download_bytes:
            bounded.max_download_bytes = undeclared
            bounded.undeclared_reserved = True
        return bounded

    def fenced(self, fence: Callable[[str], None]) -> Fetcher:
        """A copy whose downloads ask ``fence`` (with what they are about to do) before each
        chunk they write and before the rename that completes them."""
        bounded = copy.copy(self)
        bounded.fence = fence
        return bounded

    def gated(self, gate: Callable[[str, Callable[[], Any]], Any]) -> Fetcher:
        """A copy whose each download's transfer (its attempts, not the digest check after
        them) is made as ``gate(url, transfer)``: its host's circuit breaker."""
        bounded = copy.copy(self)
        bounded.gate = gate
        return bounded

    def pass_fence(self, before: str) -> None:
        if self.fence is not None:
            self.fence(before)

    # -- size estimates -------------------------------------------------------------------

    def head_sizes(self, urls: Iterable[str]) -> dict[str, int | None]:
        """Content-Length of each URL by concurrent HEAD requests; None when unknown.

        All of them together take at most ``HEAD_BUDGET`` head deadlines: many URLs on a
        slow server must not hold the worker for one deadline each. Sizes not learned by
        then are unknown, which only lowers the job's priority.
        """
        unique = list(dict.fromkeys(urls))
        if not unique:
            return {}
        ends = time.monotonic() + HEAD_BUDGET * self.head_deadline
        with fetchpool.pool(min(self.max_workers, len(unique))) as pool:
            futures = [fetchpool.submit(pool, self._head_size, url, ends) for url in unique]
        return {url: future.result() for url, future in zip(unique, futures, strict=True)}

    def _head_size(self, url: str, ends: float) -> int | None:
        remaining = ends - time.monotonic()
        if remaining <= 0:
            return None
        deadline = RequestDeadline(min(self.head_deadline, remaining))
        began = time.monotonic()
        try:
            with deadline:
                with self._open(self._sender(), "HEAD", url) as resp:
                    size = checks.content_length(resp) if resp.status_code == 200 else None
                    fetchattempts.note("head", url, began, resp, bytes=size)
                    return size
        except Exception as exc:  # an estimate must never fail the job; None says "unknown"
            reason = f"no answer within {deadline.seconds:g} s" if deadline.expired else exc
            log.info("HEAD %s gave no size: %s", url, reason)
            fetchattempts.note("head", url, began, None, error=str(reason))
            return None

    def _sender(self) -> transport.Sender:
        """This thread's strict session, with the cookies it was made with and no other.

        Made once per thread, not per request: a session, its adapters and their pools cost
        more to build than a small download costs to make. Reusing it changes nothing a
        request sends or meets: its pools keep no socket (``transport.strict_session``), and
        the cookies servers set are forgotten here, as a new session would not have them.
        """
        local = self._sessions
        sender = getattr(local, "sender", None)
        if sender is None:
            session = transport.strict_session(self.session_factory())
            sender = local.sender = transport.Sender(session, _HEADERS)
        sender.forget_cookies()
        return sender

    # -- downloads ------------------------------------------------------------------------

    def download(
        self,
        url: str,
        dest: Path,
        *,
        expected_size: int | None = None,
        digest: tuple[str, str] | None = None,
        extra_algorithms: Iterable[str] = (),
        max_bytes: int | None = None,
    ) -> DownloadResult:
        """Stream ``url`` to ``dest``; raise ``FetchError`` and leave nothing behind on failure."""
        dest = Path(dest)
        expected = checks.expected_digest(url, digest)
        algorithms = checks.algorithms(url, expected, extra_algorithms)
        part = part_path(dest)
        try:
            make_dir(dest.parent)

            def transfer():
                return fetchattempts.download_with_retries(
                    self, url, part, algorithms, expected_size, max_bytes
                )

            size, digests, written = self.gate(url, transfer) if self.gate else transfer()
            fetchattempts.note_digests(dest.name, expected, digests)
            checks.verify_digest(url, expected, digests)
            self.pass_fence(f"complete {dest.name}")
            rename_into_place(part, dest, written)
        except BaseException:
            unlink_quietly(part)
            raise
        return DownloadResult(url=url, path=dest, size=size, digests=digests)

    def download_many(
        self,
        items: list[DownloadItem],
        *,
        extra_algorithms: Iterable[str] = (),
        max_bytes: int | None = None,
    ) -> list[DownloadResult]:
        """Download concurrently; results in ``items`` order, or one error naming every failure.

        On failure every download is still waited for, so no thread keeps writing after the
        error is raised, and the partial files of the failed ones are removed. Completed
        files are kept (a retry of the step may overwrite them).
        """
        if not items:
            return []
        _refuse_duplicate_destinations(items)
        extra = tuple(extra_algorithms)
        with fetchpool.pool(min(self.max_workers, len(items))) as pool:
            futures = [
                fetchpool.submit(
                    pool,
                    self.download,
                    item.url,
                    item.dest,
                    expected_size=item.expected_size,
                    digest=item.digest,
                    extra_algorithms=extra,
                    max_bytes=max_bytes,
                )
                for item in items
            ]
        ended = [(item, f.exception()) for item, f in zip(items, futures, strict=True)]
        failures = [(item, exc) for item, exc in ended if exc is not None]
        stale = [exc for _, exc in failures if isinstance(exc, LockLost)]
        if stale:  # the step stops: not a failure of the downloads
            raise stale[0]
        if failures:
            for item, _ in failures:
                unlink_quietly(part_path(Path(item.dest)))
            raise _combined_error(len(items), failures)
        return [f.result() for f in futures]

    def _open(self, sender: transport.Sender, method: str, url: str) -> requests.Response:
        """Send ``method``, following redirects by hand so every hop passes the policy."""
        current, from_public = url, False
        for _ in range(self.max_redirects + 1):
            with pinned.judged(
                current,
                allow_loopback=self.allow_loopback,
                allow_private=self.allow_private,
                from_public=from_public,
            ) as addresses:
                resp = sender.request(method, current, timeout=self.timeout)
            from_public = from_public or is_public(addresses)
            if resp.status_code not in httputil.REDIRECT_STATUSES:
                resp.mq_addresses = addresses  # type: ignore[attr-defined]  # for the step's log
                return resp
            location = resp.headers.get("Location")
            resp.close()
            if not location:
                raise FetchError(
                    f"{current} answered {httputil.status_text(resp)} without a Location header"
                )
            current = urljoin(current, location)
        raise FetchError(f"{url}: more than {self.max_redirects} redirects; gave up")

    def get(self, url: str) -> requests.Response:
        """A GET of ``url`` on this thread's session, every hop under the policy."""
        return self._open(self._sender(), "GET", url)

    def head(self, url: str) -> requests.Response:
        """A HEAD of ``url`` on this thread's session, every hop under the policy; the
        caller closes it and bounds it (``RequestDeadline``)."""
        return self._open(self._sender(), "HEAD", url)


def _refuse_duplicate_destinations(items: list[DownloadItem]) -> None:
    seen: set[Path] = set()
    for item in items:
        dest = Path(item.dest).resolve()
        if dest in seen:
            raise ValueError(f"two downloads write to {item.dest}")
        seen.add(dest)


def _combined_error(total: int, failures: list[tuple[DownloadItem, BaseException]]) -> FetchError:
    lines = []
    for item, exc in failures:
        text = str(exc) or type(exc).__name__
        lines.append(text if item.url in text else f"{item.url}: {text}")
    retryable = all(getattr(exc, "retryable", False) for _, exc in failures)
    # One vanished part file makes the whole step one to run again later.
    gone = any(isinstance(exc, PartFileGone) for _, exc in failures)
    err = (PartFileGone if gone else FetchError)(
        f"{len(failures)} of {total} downloads failed:\n" + "\n".join(f"- {t}" for t in lines),
        retryable=retryable,
    )
    err.failures = [(item.url, exc) for item, exc in failures]
    return err
