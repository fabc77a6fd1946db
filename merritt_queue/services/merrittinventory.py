"""Recording a stored object in Merritt's inventory through its HTTP API (``merritt-api`` mode).

What Merritt's inventory takes and answers, as read from its source (CDLUC3/mrt-inventory:
``inv-src/.../app/jersey/inv/JerseyInv.java`` ``addMultipartAdd``, ``service/InvService.java``
``add``/``process``, ``action/SaveObject.java`` ``extractParts``/``process``/``checkVersion``,
``action/InvActionAbs.java`` ``getVersionMap``; the answer's shape from
``inv-it/.../ServiceDriverIT.java`` ``addObject`` and mrt-core2's ``TExceptionEnum``):

- ``POST {inventory}/add``, ``multipart/form-data`` only, with ``url``: storage's own object
  manifest, ``{storage}/manifest/{node}/{ark, percent-encoded whole}`` (what mrt-ingest's
  ProcessConsumer hands inventory: its object state URL with ``/state/`` made ``/manifest/``),
  ``responseForm`` (``json`` here) and ``checkVersion`` (default ``true``).
- Inventory reads that manifest from storage and records every version it lists. With
  ``checkVersion`` it first compares: when it already holds as many versions as the manifest,
  it writes nothing and answers exactly as for an add. So adding the same object again is a
  success, and a retry after a lost reply is safe: this client relies on that and sends
  ``checkVersion=true`` explicitly. When it holds more versions than storage lists it refuses
  (``REQUEST_INVALID``, 400): the two disagree and someone must look.
- Success: 200, ``{"invp:invProcessState": {"invp:processUrl": ..., "invp:operation": "add",
  "invp:processDateTime": ...}}``. Failure: the exception formatted in the same form under an
  ``exc:`` name (``exc:statusDescription``, ``exc:detail``, ``exc:error``...), with the status
  of its kind: 400 for a request it refuses, 500 for anything unexpected (a manifest it cannot
  read, its database), 503 for a service it depends on being unavailable.

The default ``timeout``, five minutes, is the one mrt-ingest's ``LocalIDUtil`` gives its calls
to the same service (``LOCALID_TIMEOUT``).

Guarantees: one POST per ``add`` (no retry of its own: the step's retry re-adds, which is
idempotent as above); every request goes through the operator's transport
(``transport.operator_request``) under ``timeout``; every failure is an ``InventoryError``
naming Merritt inventory, its URL and what it said, retryable for connection trouble, timeouts,
5xx, 408 and 429 and an answer without the state it should hold, not retryable otherwise.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import requests

from . import calllog, httputil, transport
from .errors import InventoryError

_STATE = "invp:invProcessState"


def storage_manifest_url(storage_url: str, node: str | int, ark: str) -> str:
    """Storage's manifest of the object, the URL inventory is given (mrt-inventory
    ``getVersionMap`` builds the same from ``storageBase``, ``node`` and the encoded ARK)."""
    return f"{storage_url.rstrip('/')}/manifest/{node}/{quote(ark, safe='')}"


class MerrittInventoryClient:
    """Merritt's inventory service at ``base_url`` (its context root, e.g.
    ``https://inventory.example.org/inventory``); see the module's docstring."""

    def __init__(
        self, base_url: str, timeout: float = 300, *, session_factory=requests.Session
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session_factory = session_factory

    def add(self, manifest_url: str) -> dict:
        """Record the object whose storage manifest is ``manifest_url``; inventory's
        ``invp:invProcessState``. Already recorded is a success too."""
        url = f"{self.base_url}/add"
        fields = {"url": manifest_url, "responseForm": "json", "checkVersion": "true"}
        resp = self._post(url, manifest_url, fields)
        if resp.status_code != 200:
            raise self._refused(manifest_url, resp)
        state = _json(resp).get(_STATE)
        if not isinstance(state, dict):
            raise InventoryError(
                f"Merritt inventory at {self.base_url} answered the add of {manifest_url} "
                f"without {_STATE}: {_excerpt(resp)}; check that MERRITT_INVENTORY_URL is "
                "inventory's own address",
                retryable=True,
            )
        return state

    def _post(self, url: str, manifest_url: str, fields: dict[str, str]) -> requests.Response:
        parts = {name: (None, value) for name, value in fields.items()}
        return calllog.logged(
            "inventory-call",
            "POST",
            url,
            lambda: transport.call_operator(
                self.session_factory,
                "POST",
                url,
                error=InventoryError,
                who=f"Merritt inventory at {self.base_url}",
                about=f" to add {manifest_url}",
                hint="; check MERRITT_INVENTORY_URL and that the inventory service is running",
                files=parts,
                headers={"Accept": "application/json"},
                timeout=self.timeout,
            ),
        )

    def _refused(self, manifest_url: str, resp: requests.Response) -> InventoryError:
        retryable = httputil.is_retryable_status(resp.status_code)
        check = (
            "it may be unwell or unable to read storage's manifest: check inventory's log"
            if retryable
            else "check that inventory and storage agree on this object, and that "
            "MERRITT_INVENTORY_URL is inventory's address"
        )
        return InventoryError(
            f"Merritt inventory at {self.base_url} refused the add of {manifest_url} "
            f"({httputil.status_text(resp)}): {said_by_inventory(resp)}; {check}",
            retryable=retryable,
        )


def _json(resp: requests.Response) -> dict:
    try:
        data = resp.json()
    except (ValueError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def said_by_inventory(resp: requests.Response) -> str:
    """What inventory's formatted exception says: its kind and detail, else the body's start."""
    for name, value in _json(resp).items():
        if name.startswith("exc:") and isinstance(value, dict):
            kind = value.get("exc:statusName") or value.get("exc:status") or ""
            detail = value.get("exc:detail") or value.get("exc:error") or ""
            description = value.get("exc:statusDescription") or ""
            words = " - ".join(str(w) for w in (kind, description, detail) if w)
            if words:
                return words[:400]
    return _excerpt(resp)


def _excerpt(resp: requests.Response) -> str:
    body = resp.content.decode("utf-8", "replace").strip().replace("\n", " ")
    return body[:300] or "(an empty body)"
