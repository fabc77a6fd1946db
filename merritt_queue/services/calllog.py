"""A call to a service, told to the current step's log (``core.steplog``).

Storage, inventory, EZID and the callback each wrap their one sending function in
``logged``: the entry names the call, the URL without credentials, the HTTP status, the
time taken and the start of the answer, or the error when no answer came. These entries are
the operators' (a depositor's view leaves them out, ``core.steprecord.public``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

from ..core import steplog
from ..deposit.urltext import hide_credentials, redact


def logged(
    kind: str, method: str, url: str, send: Callable[[], requests.Response], **fields: Any
) -> requests.Response:
    """``send()``, with an entry of ``kind`` for it in the current step's log."""
    began = time.monotonic()
    told = {"call": method, "url": redact(url), **fields}
    try:
        resp = send()
    except Exception as exc:
        steplog.note(kind, **told, ms=_ms(began), error=hide_credentials(str(exc)))
        raise
    steplog.note(kind, **told, http=resp.status_code, ms=_ms(began), excerpt=_excerpt(resp) or None)
    return resp


def _excerpt(resp: requests.Response) -> str:
    # A streamed answer's body is its reader's to read, not the log's.
    if not getattr(resp, "_content_consumed", False):
        return ""
    return steplog.excerpt(resp.content)


def _ms(began: float) -> int:
    return round((time.monotonic() - began) * 1000)
