"""What a download is held to, before and after its bytes: the size its server announces,
the most it may be (``Cap``), the digest it must have, and the deadline it must meet.
Each check raises the ``FetchError`` a librarian reads; none touches the network or disk."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import requests

from ..deposit.digest import normalise_algorithm
from .errors import FetchError
from .transport import RequestDeadline


@dataclass(frozen=True)
class Cap:
    size: int
    source: str  # the figure and where it comes from, for the message


def raise_if_expired(url: str, deadline: RequestDeadline, received: int | None):
    """The deadline's own error once it has cut the request, whatever the cut looked like.

    Not retried at once (another attempt would take as long), but retryable: the server
    may be faster later.
    """
    if not deadline.expired:
        return
    limit = f"{deadline.seconds:g} s, the download deadline (MQ_FETCH_DEADLINE)"
    if received is None:
        raise FetchError(
            f"{url}: the server is too slow: no complete response headers after {limit}",
            retryable=True,
        )
    raise FetchError(
        f"{url}: still downloading after {limit}; stopped after {received} bytes",
        retryable=True,
    )


def expected_digest(url: str, digest: tuple[str, str] | None) -> tuple[str, str] | None:
    if digest is None:
        return None
    algorithm, value = digest
    try:
        return normalise_algorithm(algorithm), value.strip().lower()
    except ValueError as exc:
        raise FetchError(f"cannot check {url}: {exc}") from None


def algorithms(url: str, expected: tuple[str, str] | None, extra: Iterable[str]) -> list[str]:
    names = [expected[0]] if expected else []
    try:
        names += [normalise_algorithm(a) for a in extra]
    except ValueError as exc:
        raise FetchError(f"cannot fetch {url}: {exc}") from None
    return list(dict.fromkeys(names))


def verify_digest(url: str, expected: tuple[str, str] | None, digests: dict[str, str]) -> None:
    if expected is None:
        return
    algorithm, value = expected
    if digests[algorithm] != value:
        raise FetchError(
            f"{algorithm} mismatch for {url}: expected {value}, got {digests[algorithm]}"
        )


def content_length(resp: requests.Response) -> int | None:
    value = resp.headers.get("Content-Length", "").strip()
    # isdigit() alone holds for '²' (a header is read as latin-1), which int() refuses.
    return int(value) if value.isascii() and value.isdigit() else None


def check_announced(
    url: str, announced: int | None, expected_size: int | None, cap: Cap | None
) -> None:
    """Refuse before reading a byte when the announced size already tells us it is wrong."""
    if announced is None:
        return
    if expected_size is not None and announced != expected_size:
        raise FetchError(
            f"size mismatch for {url}: expected {expected_size} bytes, got {announced} "
            "(announced by the server)"
        )
    if cap is not None and announced > cap.size:
        raise FetchError(f"{url} is {announced} bytes, more than {cap.source}")
