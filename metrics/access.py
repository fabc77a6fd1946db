"""Who may read ``/metrics``: a bearer token, or an address the operator listed.

Guarantees:

- By default only the token lets a request in: ``MQ_METRICS_ALLOW`` is empty. A proxy on
  the same host that adds no forwarding header (nginx adds none unless told) makes every
  request arrive from loopback, so letting loopback in by default would open /metrics to
  whoever reaches the proxy.
- A request bearing ``MQ_METRICS_TOKEN`` (``Authorization: Bearer ...``) is let in from
  anywhere; the token is compared in constant time.
- A request bearing another token is refused, wherever it comes from: a scraper with a
  stale token should hear so rather than pass on its address.
- Otherwise the remote address must lie in ``MQ_METRICS_ALLOW`` (networks the operator
  opted in, e.g. loopback where no proxy shares the host), and the request must not have
  come through a proxy (``X-Forwarded-For``, ``Forwarded``, ``X-Real-IP``): behind a proxy
  on the same host every request comes from loopback, and the proxy's own client is
  unknown here.
- A bad network in the setting lets nobody in by address (the system check ``mq.E070``
  names it); the token still works.
"""

from __future__ import annotations

import hmac
import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str) -> tuple[list[Network], list[str]]:
    """The networks of a comma-separated list, and the entries that are not networks."""
    networks, bad = [], []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            bad.append(entry)
    return networks, bad


@lru_cache(maxsize=8)
def _allowed_networks(text: str) -> tuple[Network, ...]:
    networks, bad = parse_networks(text)
    return () if bad else tuple(networks)


def _bearer(request: HttpRequest) -> str | None:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip()


def refusal(request: HttpRequest) -> str | None:
    """Why ``request`` may not read /metrics, or None when it may."""
    expected = settings.MQ_METRICS_TOKEN
    given = _bearer(request)
    if given is not None:
        if expected and hmac.compare_digest(given.encode(), expected.encode()):
            return None
        return "The bearer token is not this site's MQ_METRICS_TOKEN."
    remote = request.META.get("REMOTE_ADDR", "")
    try:
        address = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        address = None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if address is not None and any(
        address in net for net in _allowed_networks(settings.MQ_METRICS_ALLOW)
    ):
        if not any(request.META.get(h) for h in PROXY_HEADERS):
            return None
        return (
            "This request came through a proxy, so its own address is unknown: "
            "send the bearer token MQ_METRICS_TOKEN, or scrape the app directly."
        )
    if not settings.MQ_METRICS_ALLOW.strip():
        unset = "" if expected else " (none is set on this site)"
        return f"Send the bearer token MQ_METRICS_TOKEN{unset}: no address may read without it."
    how = "send the bearer token MQ_METRICS_TOKEN, or scrape" if expected else "scrape"
    return f"{remote or 'This address'} is not in MQ_METRICS_ALLOW: {how} from an allowed network."
