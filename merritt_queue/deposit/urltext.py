"""A URL's user name and password, never repeated: found in a URL, and hidden in what is
shown of it (a message, a log line, a manifest line). The door's checks (``fields``,
``manifestvalues``, ``manifestcheck``) and the services that fetch or call back a URL
(``services.netpolicy``, ``services.webhook``) share it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit


def userinfo_of(url: str) -> str:
    """The ``user:password`` part of ``url`` ("" when none)."""
    netloc = urlsplit(url).netloc
    return netloc.rpartition("@")[0]


def redact(url: str) -> str:
    """``url`` with any user name and password replaced by ``***``, fit for a message."""
    if not userinfo_of(url):
        return url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"***@{host}").geturl()


# ``scheme://user:password@`` anywhere in a text; the user part may be empty or odd.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s|]*@")


def hide_credentials(text: str) -> str:
    """``text`` with the user name and password of every URL in it replaced by ``***``: a
    whole manifest line or a URL no parser accepts is shown without them too."""
    return _USERINFO.sub(r"\g<head>***@", text)
