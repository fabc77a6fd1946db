"""Merritt's local-id service: which ARK a depositor's local id names, and telling it so.

Merritt's ingest keeps the binding of local ids to ARKs in inventory's local-id tables, and
every Merritt service that finds an object by its local id reads them there. A site whose
objects live in Merritt must keep them true for ours too, or Merritt's next ingest of the same
local id mints a second object. Read from the source (CDLUC3/mrt-ingest ``LocalIDUtil``
``fetchPrimaryID``/``addLocalID``, ``HandlerMinter``, ``HandlerTransfer``; CDLUC3/mrt-inventory
``JerseyInv`` ``callPrimary``/``callAddPrimary``, ``service/LocalContainerState``):

- ``GET {inventory}/primary/{owner ARK}/{local id}?t=json`` answers
  ``{"invloc:localContainerState": {"invloc:exists": bool, "invloc:primaryIdentifier": ark}}``;
  mrt-ingest asks before minting, when a job has a local id and no ARK.
- ``POST {inventory}/primary/{ARK}/{owner ARK}/{local ids}?t=json`` (an empty form body) binds
  the ids, the job's value as a whole (``a;b``: the service splits it); mrt-ingest sends it
  on every version, just before storing, so sending it again is expected and harmless.
- Any status but 200 is a refusal. Each part of the path is percent-encoded whole, a space as
  ``%20``: mrt-core's ``URLEncoder`` turns ``java.net.URLEncoder``'s ``+`` into ``%20``, so
  inventory decodes both senders' paths to the same id.

Guarantees: every request goes through the operator's transport under ``timeout`` (five
minutes, mrt-ingest's ``LOCALID_TIMEOUT``); a failure is an ``InventoryError`` naming the
service, retryable for connection trouble, timeouts, 5xx, 408 and 429.
"""

from __future__ import annotations

from urllib.parse import quote

import requests

from . import httputil, transport
from .errors import InventoryError
from .merrittinventory import MerrittInventoryClient, said_by_inventory

_STATE = "invloc:localContainerState"


class MerrittLocalIds(MerrittInventoryClient):
    """The local-id service of Merritt's inventory at ``base_url`` (its context root)."""

    def ark_for(self, owner_ark: str, local_id: str) -> str | None:
        """The ARK Merritt has bound ``local_id`` of ``owner_ark`` to, None when none."""
        url = f"{self.base_url}/primary/{_part(owner_ark)}/{_part(local_id)}?t=json"
        resp = self._call("GET", url, f" for local id {local_id}")
        state = _state(resp, url)
        if not state.get("invloc:exists"):
            return None
        ark = state.get("invloc:primaryIdentifier")
        return ark if isinstance(ark, str) and ark else None

    def bind(self, ark: str, owner_ark: str, local_ids: list[str]) -> None:
        """Tell Merritt that ``local_ids`` of ``owner_ark`` name ``ark``."""
        value = ";".join(local_ids)
        url = f"{self.base_url}/primary/{_part(ark)}/{_part(owner_ark)}/{_part(value)}?t=json"
        resp = self._call("POST", url, f" to bind local id {value} to {ark}", data={})
        _state(resp, url)

    def _call(self, method: str, url: str, about: str, **kwargs) -> requests.Response:
        resp = transport.call_operator(
            self.session_factory,
            method,
            url,
            error=InventoryError,
            who=f"Merritt's local-id service at {self.base_url}",
            about=about,
            hint="; check MERRITT_INVENTORY_URL and that the inventory service is running",
            headers={"Accept": "application/json"},
            timeout=self.timeout,
            **kwargs,
        )
        if resp.status_code != 200:
            retryable = httputil.is_retryable_status(resp.status_code)
            did = "could not answer" if retryable else "refused"
            raise InventoryError(
                f"Merritt's local-id service at {self.base_url} {did}{about} "
                f"({httputil.status_text(resp)}): {said_by_inventory(resp)}",
                retryable=retryable,
            )
        return resp


def _part(value: str) -> str:
    return quote(value, safe="")


def _state(resp: requests.Response, url: str) -> dict:
    try:
        state = resp.json().get(_STATE)
    except (ValueError, AttributeError):
        state = None
    if not isinstance(state, dict):
        raise InventoryError(
            f"Merritt's local-id service answered {url} without {_STATE}; check that "
            "MERRITT_INVENTORY_URL is inventory's own address",
            retryable=True,
        )
    return state
