"""The one door to kazoo's private ``KazooClient._call``: a request sent as built.

kazoo sends every request through ``_call(request, async_object)``; its public calls
(``create_async``, ``transaction().commit_async()``, ...) build and check the request
first, and it has none for ``multiRead``. The store's hot path (``store/engine.py``:
prebuilt multis and creates; ``store/reads.py``: single stats) and the tree reader
(``multiread.py``: the ``multiRead`` request kazoo lacks) need the bare send, so it lives
here alone and ``tests/core/test_kazoocall.py`` pins its contract to the installed kazoo:
the signature, a request reaching the server, and the short-circuit of a closed client.

Guarantees:

- ``send`` returns kazoo's async result at once; ``.get()`` gives the answer, or raises
  what kazoo sets on it (a closed or expired client's error without anything sent).
- The client's ``_call`` is looked up at each send, so a test or benchmark that wraps it
  (counting the requests sent) sees every one.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient


def send(client: KazooClient, request: Any) -> Any:
    """Queue ``request`` (a kazoo protocol request) on ``client``; its pending result."""
    result = client.handler.async_result()
    client._call(request, result)
    return result
