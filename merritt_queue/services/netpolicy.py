"""Which URLs the ingest may fetch from or call back.

Guarantees: ``check_url`` returns only when the scheme is allowed, the URL names a host and
holds no user name or password, and every address that host resolves to is public (or
loopback/private, when explicitly allowed). Link-local (cloud metadata at 169.254.169.254),
multicast, reserved and unspecified addresses are always refused. A redirect from a public
host (``from_public``) may only lead to another public address, whatever is allowed: allowing
loopback lets the demo fetch from itself, not lets any server on the internet aim us at it.
Numeric host forms (``2130706433``, ``0177.0.0.1``) are judged by the address they resolve
to, as the connection would be. An IPv6 address that carries an IPv4 address a translator or
tunnel would deliver to (IPv4-mapped and -compatible, 6to4 ``2002::/16``, Teredo
``2001::/32``, NAT64 ``64:ff9b::/96``) is judged by that IPv4 address too; the local-use
NAT64 prefix ``64:ff9b:1::/48`` counts as private. It never opens a connection: it only
resolves the name, once. The addresses it returns are the only ones a request may then
connect to (``pinned.judged``): resolving again to connect would let a DNS server answer
differently the second time (DNS rebinding) and reach an address never judged.
Messages never repeat a password found in a URL.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from ..deposit.urltext import redact, userinfo_of
from .errors import FetchError

_DEFAULT_PORTS = {"http": 80, "https": 443}


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def check_url(
    url: str,
    *,
    allow_loopback: bool = False,
    allow_private: bool = False,
    schemes: tuple[str, ...] = ("http", "https"),
    from_public: bool = False,
) -> list[Address]:
    """The addresses ``url`` resolves to; ``FetchError(retryable=False)`` unless allowed.

    ``from_public``: ``url`` is where a public host redirected us, so only public
    addresses are allowed.
    """
    shown = redact(url)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        allowed = ", ".join(schemes)
        raise FetchError(
            f"refused {shown}: scheme {scheme or '(none)'!r} is not allowed (only {allowed})"
        )
    if userinfo_of(url):
        raise FetchError(
            f"refused {shown}: the URL holds a user name or password (user:password@host); "
            "credentials in URLs are not accepted"
        )
    host = parts.hostname
    if not host:
        raise FetchError(f"refused {shown}: the URL names no host")
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        raise FetchError(f"refused {shown}: the port is not a number between 0 and 65535") from None
    addresses = _resolve(shown, host, port)
    for address in addresses:
        problem = _address_problem(address, allow_loopback, allow_private)
        if problem:
            raise FetchError(
                f"refused {shown}: host {host} resolves to {problem} address {address}"
            )
        if address in _NAT64_LOCAL and (from_public or not allow_private):
            raise FetchError(
                f"refused {shown}: host {host} resolves to {address}, an address of the "
                "local-use NAT64 prefix 64:ff9b:1::/48, which may reach any private IPv4 address"
            )
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            problem = _address_problem(embedded, allow_loopback, allow_private)
            if problem or (from_public and not embedded.is_global):
                kind = problem or "a non-public"
                raise FetchError(
                    f"refused {shown}: host {host} resolves to {address}, which carries "
                    f"{kind} IPv4 address {embedded}"
                )
        if from_public and not address.is_global:
            raise FetchError(
                f"refused {shown}: a public host redirected to {host}, which resolves to the "
                f"non-public address {address}; a redirect from a public host must stay public"
            )
    return addresses


def is_public(addresses: list[Address]) -> bool:
    return all(_is_global(a) for a in addresses)


def _is_global(address: Address) -> bool:
    embedded = _embedded_ipv4(address)
    return (
        address.is_global
        and address not in _NAT64_LOCAL
        and (embedded is None or embedded.is_global)
    )


_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address that traffic to this IPv6 address would reach, if any."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]  # (server, client): the client is where traffic goes
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _resolve(url: str, host: str, port: int) -> list[Address]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        # EAI_AGAIN is a DNS server that did not answer in time: worth another try later.
        temporary = exc.errno == socket.EAI_AGAIN
        raise FetchError(
            f"cannot resolve the host of {url}: {exc.strerror or exc}", retryable=temporary
        ) from None
    except UnicodeError:
        raise FetchError(f"refused {url}: the host name is not valid") from None
    addresses = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id such as %eth0
        address = ipaddress.ip_address(text)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        addresses.append(address)
    if not addresses:
        raise FetchError(f"cannot resolve the host of {url}: no address", retryable=True)
    return addresses


def _address_problem(
    address: Address,
    allow_loopback: bool,
    allow_private: bool,
) -> str | None:
    """The kind of forbidden address, or None when it may be contacted."""
    if address.is_unspecified:
        return "an unspecified"
    if address.is_loopback:
        return None if allow_loopback else "a loopback"
    if address.is_link_local:
        return "a link-local"
    if address.is_multicast:
        return "a multicast"
    if address.is_reserved:
        return "a reserved"
    if address.is_private or not address.is_global:
        return None if allow_private else "a private"
    return None
