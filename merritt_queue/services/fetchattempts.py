"""One download's transfer into its part file, attempt by attempt; and what the step's log
is told of each request.

Guarantees:

- Memory stays bounded: bodies are streamed in ``chunk_size`` pieces straight to the part
  file, with the digests computed on the way (on a thread of their own unless the announced
  body fits one buffer, see ``partfile.Sink``). A failed attempt leaves no part file.
- The fetcher's fence (``Fetcher.fenced``) is asked before each chunk is written.
- Connection errors, timeouts, 408, 429 and 5xx are retried with exponential backoff (a
  server's Retry-After is honoured, up to 30 s); other 4xx are not. ``retries`` is the total
  number of attempts.
- With ``deadline``, no download attempt takes longer than that many seconds from connect to
  last byte, headers included: a server that trickles its headers or body slowly enough
  never to trip the read timeout is cut off all the same (see ``transport``).
- No file grows past its declared size: the expected size, the size a HEAD announced
  (``Fetcher.with_declared_sizes``) or, when neither is known, ``max_download_bytes`` (or
  what Estimating reserved for such a file); nor past ``max_bytes``. The download stops as
  soon as the next chunk would pass the cap, so at most the cap is ever written.
- A response cut off inside its headers, shorter than its Content-Length, or with more bytes
  than its Content-Length already received, is a failed attempt, never a stored file.
- Each HEAD and each download attempt is told to the current step's log (``steplog``): the
  URL without its credentials, the address reached, the HTTP status, the bytes, the time
  taken and why it was retried; a completed download's digests, expected and computed.

The fetcher is read through ``Fetching`` only, so this module never imports ``fetch``.
"""

from __future__ import annotations

import http.client
import logging
import time
from pathlib import Path
from typing import Protocol

import requests
import urllib3.exceptions

from ..core import steplog
from ..deposit.digest import Hashers
from ..deposit.urltext import redact
from . import fetchchecks as checks
from . import httputil, transport
from .errors import FetchError
from .partfile import Sink, open_for_writing, unlink_quietly, written_identity
from .transport import RequestDeadline

# The name these warnings had before this module was split from ``fetch``, which log
# settings may name.
log = logging.getLogger("merritt_queue.services.fetch")


class Fetching(Protocol):
    """What of a ``Fetcher`` one download's attempts read."""

    timeout: tuple[float, float]
    retries: int
    backoff: float
    chunk_size: int
    deadline: float | None
    max_download_bytes: int | None
    undeclared_reserved: bool
    declared_sizes: dict[str, int]

    def pass_fence(self, before: str) -> None: ...

    def get(self, url: str) -> requests.Response: ...


class _Transient(Exception):
    """One attempt failed in a way that another attempt may fix."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class _ConnectionClosed(_Transient):
    """The body ended early or the connection broke (not a timeout)."""


def download_with_retries(
    fetcher: Fetching,
    url: str,
    part: Path,
    algorithms: list[str],
    expected_size: int | None,
    max_bytes: int | None,
) -> tuple[int, dict[str, str], tuple[int, int]]:
    last: _Transient | None = None
    for attempt in range(1, fetcher.retries + 1):
        began, seen = time.monotonic(), _Seen()
        told = {"try": attempt}
        try:
            got = _attempt(fetcher, url, part, algorithms, expected_size, max_bytes, seen)
            note("get", url, began, seen.response, bytes=got[0], **told)
            return got
        except _Transient as exc:
            last = exc
            unlink_quietly(part)
            why = "retry" if attempt < fetcher.retries else "error"
            note(
                "get",
                url,
                began,
                seen.response,
                bytes=seen.received,
                **told,
                **{why: exc.reason},
            )
            if attempt < fetcher.retries:
                log.warning("GET %s attempt %d failed (%s); retrying", url, attempt, exc)
                httputil.sleep_before_retry(exc.delay, fetcher.backoff, attempt)
        except FetchError as exc:
            note("get", url, began, seen.response, bytes=seen.received, **told, error=str(exc))
            raise
    assert last is not None
    raise FetchError(
        f"GET {url} failed after {httputil.attempts_text(fetcher.retries)}: {last.reason}",
        retryable=True,
    )


def _attempt(
    fetcher: Fetching,
    url: str,
    part: Path,
    algorithms: list[str],
    expected_size: int | None,
    max_bytes: int | None,
    seen: _Seen | None = None,
) -> tuple[int, dict[str, str], tuple[int, int]]:
    seen = seen or _Seen()
    cap = _cap(fetcher, expected_size, url, max_bytes)
    deadline = RequestDeadline(fetcher.deadline)
    with deadline:
        try:
            resp = fetcher.get(url)
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
            body = seen.body = _Body(url, resp, fetcher.timeout[1])
            try:
                size, digests, written = _stream(fetcher, body, part, algorithms, announced, cap)
            except (_Transient, FetchError):
                checks.raise_if_expired(url, deadline, body.received)
                raise
            checks.raise_if_expired(url, deadline, body.received)
    if expected_size is not None and size != expected_size:
        raise FetchError(f"size mismatch for {url}: expected {expected_size} bytes, got {size}")
    return size, digests, written


def _cap(
    fetcher: Fetching, expected_size: int | None, url: str, max_bytes: int | None
) -> checks.Cap | None:
    """The most bytes ``url`` may give, and where that figure comes from."""
    caps = []
    if expected_size is not None:
        caps.append(checks.Cap(expected_size, f"its declared size of {expected_size} bytes"))
    head = fetcher.declared_sizes.get(url)
    if head is not None:
        caps.append(checks.Cap(head, f"the size of {head} bytes its HEAD request gave"))
    # A declared size was reserved on disk by Provisioning; an undeclared one was not.
    if not caps and fetcher.max_download_bytes:
        caps.append(_undeclared_cap(fetcher, fetcher.max_download_bytes))
    if max_bytes is not None:
        caps.append(checks.Cap(max_bytes, f"the limit of {max_bytes} bytes"))
    return min(caps, key=lambda c: c.size) if caps else None


def _undeclared_cap(fetcher: Fetching, limit: int) -> checks.Cap:
    if fetcher.undeclared_reserved:
        return checks.Cap(
            limit,
            f"the {limit} bytes reserved for a file of undeclared size (the room under "
            "MQ_DISK_THRESHOLD when the job was estimated, at most MQ_MAX_DOWNLOAD_BYTES)",
        )
    return checks.Cap(limit, f"the limit of {limit} bytes (MQ_MAX_DOWNLOAD_BYTES)")


def _stream(
    fetcher: Fetching,
    body: _Body,
    part: Path,
    algorithms: list[str],
    announced: int | None,
    cap: checks.Cap | None,
) -> tuple[int, dict[str, str], tuple[int, int]]:
    url = body.url
    hasher = Hashers(algorithms) if algorithms else None
    # No buffer larger than the announced body: a small file needs no big one.
    size = fetcher.chunk_size if announced is None else max(1, min(fetcher.chunk_size, announced))
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
                fetcher.pass_fence(writing)
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


class _Seen:
    """What one download attempt got as far as, for the step's log."""

    def __init__(self) -> None:
        self.response: requests.Response | None = None
        self.body: _Body | None = None

    @property
    def received(self) -> int | None:
        return self.body.received if self.body is not None else None


def note(kind: str, url: str, began: float, resp: requests.Response | None, **fields) -> None:
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


def note_digests(name: str, expected: tuple[str, str] | None, digests: dict[str, str]) -> None:
    if expected is None and not digests:
        return
    steplog.note(
        "digest",
        file=name,
        expected={expected[0]: expected[1]} if expected else None,
        computed=digests,
        ok=None if expected is None else digests.get(expected[0]) == expected[1],
    )


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
