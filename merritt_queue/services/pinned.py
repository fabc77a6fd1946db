"""Where the transport may connect: to the addresses ``netpolicy`` judged, nowhere else.

Guarantees:

- ``judged(url, ...)`` resolves the URL's host once (``netpolicy.check_url``: every address
  judged, ``FetchError`` unless all are allowed) and, until its block ends, lets this
  thread's connections to that host and port go to those addresses only, each tried in
  turn in the order resolved. The name is not resolved again to connect, so a DNS server
  that answers differently the second time (DNS rebinding) reaches nothing that was not
  judged. The name still goes in the ``Host`` header, the TLS SNI and the certificate check.
- ``open_socket`` is the only way the transport's connections (``transport``) get a socket:
  asked for a host and port that no block open on this thread judged, it raises
  ``Unjudged`` and resolves nothing. A request that skipped the policy fails loudly instead
  of connecting wherever DNS says.
- A numeric host connects to exactly that address.

Judgements belong to a thread and a block, not to a session: a request on another thread,
or after the block, is judged anew.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import requests
from urllib3.util import parse_url

from .errors import FetchError
from .netpolicy import Address, check_url, redact

_DEFAULT_PORTS = {"http": 80, "https": 443}

_local = threading.local()


class Unjudged(RuntimeError):
    """A connection was asked for a host and port that no judgement covers.

    Not an ``OSError``: urllib3 would take that for a failed connection and retry it.
    """


@contextmanager
def judged(
    url: str,
    *,
    allow_loopback: bool = False,
    allow_private: bool = False,
    from_public: bool = False,
) -> Iterator[list[Address]]:
    """The addresses ``url`` resolves to, all allowed; connections go only to them."""
    addresses = check_url(
        url,
        allow_loopback=allow_loopback,
        allow_private=allow_private,
        from_public=from_public,
    )
    key = _key_of_url(url)
    pins = _pins()
    outer = pins.get(key)
    pins[key] = tuple(addresses)
    try:
        yield addresses
    finally:
        if outer is None:
            pins.pop(key, None)
        else:
            pins[key] = outer


def open_socket(
    host: str,
    port: int,
    timeout: float | None,
    source_address: tuple[str, int] | None = None,
    socket_options: Sequence[tuple[int, int, int | bytes]] | None = None,
) -> socket.socket:
    """A socket connected to one of the addresses judged for ``host:port``; the last
    address's ``OSError`` when none answers."""
    addresses = _pins().get(_key(host, port))
    if addresses is None:
        raise Unjudged(
            f"no address of {host}:{port} was judged on this thread; "
            "a request must be made inside pinned.judged"
        )
    error: OSError | None = None
    for address in addresses:
        try:
            return _connect(address, port, timeout, source_address, socket_options)
        except OSError as exc:
            error = exc
    assert error is not None  # check_url never returns an empty list
    raise error


def _connect(
    address: Address,
    port: int,
    timeout: float | None,
    source_address: tuple[str, int] | None,
    socket_options: Sequence[tuple[int, int, int | bytes]] | None,
) -> socket.socket:
    # The socket is made for the address itself: nothing here consults a resolver.
    if address.version == 6:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        target: tuple = (str(address), port, 0, 0)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        target = (str(address), port)
    try:
        for option in socket_options or ():
            sock.setsockopt(*option)
        sock.settimeout(timeout)
        if source_address:
            sock.bind(source_address)
        sock.connect(target)
    except BaseException:
        sock.close()
        raise
    return sock


def _pins() -> dict[tuple[str, int], tuple[Address, ...]]:
    pins = getattr(_local, "pins", None)
    if pins is None:
        pins = _local.pins = {}
    return pins


def _key_of_url(url: str) -> tuple[str, int]:
    """The host and port as the connection pool will name them: requests' IDNA form of the
    host, which may differ from the name ``check_url`` resolved only in its spelling."""
    prepared = requests.PreparedRequest()
    try:
        prepared.prepare_url(url, None)
    except requests.RequestException as exc:
        raise FetchError(f"refused {redact(url)}: {exc}") from None
    parts = parse_url(prepared.url or "")
    scheme = (parts.scheme or "").lower()
    return _key(parts.host or "", parts.port or _DEFAULT_PORTS.get(scheme, 0))


def _key(host: str, port: int) -> tuple[str, int]:
    # urllib3 drops an IPv6 literal's brackets and a trailing dot before it connects.
    return host.strip("[]").rstrip(".").lower(), port
