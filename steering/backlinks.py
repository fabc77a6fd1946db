"""Where a Cancel or Back link goes: the page the person came from, when it is a page of
this site, else a list; never ``javascript:history.back()``, which goes nowhere in a new tab
and cannot be opened, bookmarked or read aloud as a link."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.utils.http import url_has_allowed_host_and_scheme


def safe_next(request, url: str) -> str:
    """Where the person came from (a list with its filter), if it is a page of this site."""
    if url.startswith("/") and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return url
    return ""


def came_from(request, fallback: str) -> str:
    """``?next=``, else the Referer when it is another page of this site, else ``fallback``."""
    if back := safe_next(request, request.GET.get("next", "")):
        return back
    referer = urlsplit(request.META.get("HTTP_REFERER", ""))
    if referer.netloc == request.get_host() and referer.path != request.path:
        path = referer.path + (f"?{referer.query}" if referer.query else "")
        if back := safe_next(request, path):
            return back
    return fallback
