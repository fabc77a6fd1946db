"""Fetching depositor content over HTTP(S).

Guarantees:

- Every URL, and every redirect hop, passes ``netpolicy.check_url`` before any connection is
  made to it, and is connected to at the addresses that check judged, never at a second
  answer of the resolver (``pinned``); redirects are followed by hand, at most
  ``max_redirects`` of them. Once a hop was a public host, every later hop must be public
  too (see ``netpolicy``).
- Memory stays bounded: bodies are streamed in ``chunk_size`` pieces straight to disk, with the
  digests computed on the way (on a thread of their own unless the announced body fits one
  buffer, see ``partfile.Sink``).
- ``dest`` appears only complete, verified and on the disk: bytes go to ``<dest>.part``, which
  is fsynced, then renamed onto ``dest`` after the size and digest checks pass, and removed
  on any error, an error of a helper thread included. A part file that vanished or was
  replaced meanwhile is ``PartFileGone`` (retryable), never a stored file.
- A fenced fetcher (``fenced``) asks its fence before writing each chunk and before the
  rename: a step that lost its lock stops there, and its error (``LockLost``) is raised as
  it is, never folded into a ``FetchError``.
- Connection errors, timeouts, 408, 429 and 5xx are retried with exponential backoff (a
  server's Retry-After is honoured, up to 30 s); other 4xx are not. ``retries`` is the total
  number of attempts.
- ``head_sizes`` never raises for one URL: an unknown or failed size is None. Each HEAD
  has a wall-clock limit of its own (``head_deadline``) from connect to last byte, and
  the whole call a few of them (``HEAD_BUDGET``).
- With ``deadline``, no download attempt takes longer than that many seconds from connect to
  last byte, headers included: a server that trickles its headers or body slowly enough
  never to trip the read timeout is cut off all the same (see ``transport``).
- No file grows past its declared size: the expected size, the size a HEAD announced
  (``with_declared_sizes``) or, when neither is known, ``max_download_bytes`` (or what
  Estimating reserved for such a file, given to ``with_declared_sizes``); nor past
  ``max_bytes``. The download stops as soon as the next chunk would pass the cap, so at
  most the cap is ever written.
- A response cut off inside its headers, shorter than its Content-Length, or with more bytes
  than its Content-Length already received, is a failed attempt, never a stored file.
- No request takes anything from the operator's environment: no ``~/.netrc`` credentials
  for a depositor's host, no proxy between us and the address the policy checked (see
  ``transport.strict_session``).
- Each HEAD and each download attempt is told to the current step's log (``steplog``): the
  URL without its credentials, the address reached, the HTTP status, the bytes, the time
  taken and why it was retried; a completed download's digests, expected and computed.
"""

from __future__ import annotations

import contextvars
import copy
import http.client
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests
import urllib3.exceptions

from ..core import steplog
from ..core.errors import LockLost
from ..deposit.digest import Hashers
from ..deposit.urltext import redact
from . import fetchchecks as checks
from . import httputil, pinned, transport
from .errors import FetchError, PartFileGone
from .netpolicy import is_public
from .partfile import (
    Sink,
    make_dir,
    open_for_writing,
    part_path,
    rename_into_place,
    unlink_quietly,
    written_identity,
)
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


class _Transient(Exception):
    """One attempt failed in a way that another attempt may fix."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class _ConnectionClosed(_Transient):
    """The body ended early or the connection broke (not a timeout)."""


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

    def _pass_fence(self, before: str) -> None:
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
        with _pool(min(self.max_workers, len(unique))) as pool:
            futures = [_submit(pool, self._head_size, url, ends) for url in unique]
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
                    _note("head", url, began, resp, bytes=size)
                    return size
        except Exception as exc:  # an estimate must never fail the job; None says "unknown"
            reason = f"no answer within {deadline.seconds:g} s" if deadline.expired else exc
            log.info("HEAD %s gave no size: %s", url, reason)
            _note("head", url, began, None, error=str(reason))
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
                return self._download_with_retries(url, part, algorithms, expected_size, max_bytes)

            size, digests, written = self.gate(url, transfer) if self.gate else transfer()
            _note_digests(dest.name, expected, digests)
            checks.verify_digest(url, expected, digests)
            self._pass_fence(f"complete {dest.name}")
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
        with _pool(min(self.max_workers, len(items))) as pool:
            futures = [
                _submit(
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

    # -- one download, attempt by attempt -------------------------------------------------

    def _download_with_retries(
        self,
        url: str,
        part: Path,
        algorithms: list[str],
        expected_size: int | None,
        max_bytes: int | None,
    ) -> tuple[int, dict[str, str], tuple[int, int]]:
        last: _Transient | None = None
        for attempt in range(1, self.retries + 1):
            began, seen = time.monotonic(), _Seen()
            told = {"try": attempt}
            try:
                got = self._attempt(url, part, algorithms, expected_size, max_bytes, seen)
                _note("get", url, began, seen.response, bytes=got[0], **told)
                return got
            except _Transient as exc:
                last = exc
                unlink_quietly(part)
                why = "retry" if attempt < self.retries else "error"
                _note(
                    "get",
                    url,
                    began,
                    seen.response,
                    bytes=seen.received,
                    **told,
                    **{why: exc.reason},
                )
                if attempt < self.retries:
                    log.warning("GET %s attempt %d failed (%s); retrying", url, attempt, exc)
                    httputil.sleep_before_retry(exc.delay, self.backoff, attempt)
            except FetchError as exc:
                _note("get", url, began, seen.response, bytes=seen.received, **told, error=str(exc))
                raise
        assert last is not None
        raise FetchError(
            f"GET {url} failed after {httputil.attempts_text(self.retries)}: {last.reason}",
            retryable=True,
        )

    def _attempt(
        self,
        url: str,
        part: Path,
        algorithms: list[str],
        expected_size: int | None,
        max_bytes: int | None,
        seen: _Seen | None = None,
    ) -> tuple[int, dict[str, str], tuple[int, int]]:
        seen = seen or _Seen()
        cap = self._cap(expected_size, url, max_bytes)
        deadline = RequestDeadline(self.deadline)
        with deadline:
            try:
                resp = self._open(self._sender(), "GET", url)
            except requests.RequestException as exc:
                checks.raise_if_expired(url, deadline, None)
                raise _as_transient_or_fatal(url, exc) from exc
            except BaseException:
                checks.raise_if_expired(url, deadline, None)
                raise
            seen.response = resp
            with resp:
                _raise_for_status(url, resp)
                announced = checks.content_length(resp)
                checks.check_announced(url, announced, expected_size, cap)
                body = seen.body = _Body(url, resp, self.timeout[1])
                try:
                    size, digests, written = self._stream(body, part, algorithms, announced, cap)
                except (_Transient, FetchError):
                    checks.raise_if_expired(url, deadline, body.received)
                    raise
                checks.raise_if_expired(url, deadline, body.received)
        if expected_size is not None and size != expected_size:
            raise FetchError(f"size mismatch for {url}: expected {expected_size} bytes, got {size}")
        return size, digests, written

    def _cap(self, expected_size: int | None, url: str, max_bytes: int | None) -> checks.Cap | None:
        """The most bytes ``url`` may give, and where that figure comes from."""
        caps = []
        if expected_size is not None:
            caps.append(checks.Cap(expected_size, f"its declared size of {expected_size} bytes"))
        head = self.declared_sizes.get(url)
        if head is not None:
            caps.append(checks.Cap(head, f"the size of {head} bytes its HEAD request gave"))
        # A declared size was reserved on disk by Provisioning; an undeclared one was not.
        if not caps and self.max_download_bytes:
            caps.append(self._undeclared_cap(self.max_download_bytes))
        if max_bytes is not None:
            caps.append(checks.Cap(max_bytes, f"the limit of {max_bytes} bytes"))
        return min(caps, key=lambda c: c.size) if caps else None

    def _undeclared_cap(self, limit: int) -> checks.Cap:
        if self.undeclared_reserved:
            return checks.Cap(
                limit,
                f"the {limit} bytes reserved for a file of undeclared size (the room under "
                "MQ_DISK_THRESHOLD when the job was estimated, at most MQ_MAX_DOWNLOAD_BYTES)",
            )
        return checks.Cap(limit, f"the limit of {limit} bytes (MQ_MAX_DOWNLOAD_BYTES)")

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

    def _stream(
        self,
        body: _Body,
        part: Path,
        algorithms: list[str],
        announced: int | None,
        cap: checks.Cap | None,
    ) -> tuple[int, dict[str, str], tuple[int, int]]:
        url = body.url
        hasher = Hashers(algorithms) if algorithms else None
        # No buffer larger than the announced body: a small file needs no big one.
        size = self.chunk_size if announced is None else max(1, min(self.chunk_size, announced))
        one_buffer = announced is not None and announced <= size
        writing = f"write more of {part.name}"
        with open_for_writing(part) as out:
            written = written_identity(out)
            sink = Sink(out, part, hasher, size, digest_here=one_buffer)
            try:
                while True:
                    buffer = sink.buffer()
                    # One byte past the cap tells that it was passed; that byte is not kept.
                    room = buffer if cap is None else buffer[: cap.size - body.received + 1]
                    length = body.readinto(room)
                    if not length:
                        break
                    if cap is not None and body.received > cap.size:
                        raise FetchError(f"{url} sent more than {cap.source}; stopped")
                    self._pass_fence(writing)
                    sink.put(buffer, length)
            except _ConnectionClosed as exc:
                sink.abandon()
                if announced is not None and body.received < announced:
                    raise _Transient(
                        f"{url}: server sent {body.received} bytes, announced {announced}"
                    ) from exc
                raise
            except BaseException:
                sink.abandon()
                raise
            sink.close()
        received = body.received
        if announced is not None and received != announced:
            raise _Transient(f"{url}: server sent {received} bytes, announced {announced}")
        if transport.overlong(body.response):
            raise FetchError(
                f"{url}: the server sent more bytes than the {announced} of its Content-Length; "
                "the response is not trusted and nothing was kept"
            )
        return received, hasher.hexdigests() if hasher else {}, written


class _Body:
    """A response's body, raw (never decoded: what the server holds is what we keep and
    digest), read straight into the caller's buffers; ``received`` counts its bytes."""

    def __init__(self, url: str, response: requests.Response, read_timeout: float) -> None:
        self.url, self.response, self.received = url, response, 0
        self._readinto = transport.raw_readinto(response)
        self._read_timeout = read_timeout

    def readinto(self, buffer: memoryview) -> int:
        """Bytes read into ``buffer``, 0 at the end; a failed read is a failed attempt."""
        try:
            length = self._readinto(buffer)
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            raise _Transient(
                f"{self.url}: no data for {self._read_timeout:g} s while reading the body "
                "(read timeout)"
            ) from None
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
            raise _ConnectionClosed(
                f"{self.url}: connection broke while reading the body ({exc})"
            ) from exc
        self.received += length
        return length


# -- helpers ------------------------------------------------------------------------------


class _Seen:
    """What one download attempt got as far as, for the step's log."""

    def __init__(self) -> None:
        self.response: requests.Response | None = None
        self.body: _Body | None = None

    @property
    def received(self) -> int | None:
        return self.body.received if self.body is not None else None


def _note(kind: str, url: str, began: float, resp: requests.Response | None, **fields) -> None:
    """One request, as the step's log keeps it (``steplog``)."""
    addresses = getattr(resp, "mq_addresses", None) or ()
    steplog.note(
        kind,
        url=redact(url),
        addr=", ".join(str(a) for a in addresses[:3]) or None,
        http=resp.status_code if resp is not None else None,
        ms=round((time.monotonic() - began) * 1000),
        **fields,
    )


def _note_digests(name: str, expected: tuple[str, str] | None, digests: dict[str, str]) -> None:
    if expected is None and not digests:
        return
    steplog.note(
        "digest",
        file=name,
        expected={expected[0]: expected[1]} if expected else None,
        computed=digests,
        ok=None if expected is None else digests.get(expected[0]) == expected[1],
    )


def _submit(pool: ThreadPoolExecutor | _Inline, fn, /, *args, **kwargs) -> Future:
    """``pool.submit``, the call run in a copy of the caller's context: a thread of the pool
    tells the caller's step log what it did."""
    return pool.submit(contextvars.copy_context().run, fn, *args, **kwargs)


def _pool(workers: int) -> ThreadPoolExecutor | _Inline:
    """Where HEADs and downloads run: one (most deposits) in the caller's thread, since a
    pool would only add a thread's start and hand-over to every small request."""
    return ThreadPoolExecutor(max_workers=workers) if workers > 1 else _Inline()


class _Inline:
    """An executor that runs each call at once in the caller's thread."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # a failure is the future's, as in a pool
            future.set_exception(exc)
        return future


def _raise_for_status(url: str, resp: requests.Response) -> None:
    code = resp.status_code
    if 200 <= code < 300:
        return
    if httputil.is_retryable_status(code):
        raise _Transient(f"{url} returned {httputil.status_text(resp)}", httputil.retry_after(resp))
    raise FetchError(f"{url} returned {httputil.status_text(resp)}")


def _as_transient_or_fatal(url: str, exc: requests.RequestException) -> Exception:
    if transport.truncated_headers(exc):
        return _Transient(f"{url}: the server closed the connection inside the response headers")
    if httputil.is_transient(exc):
        return _Transient(f"{url}: {httputil.describe(exc)}")
    return FetchError(f"cannot fetch {url}: {httputil.describe(exc)}")


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
