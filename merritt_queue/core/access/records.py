"""An access request as read from ZooKeeper: its status, token, lock and history.

Decoding never raises: what MerrittZK could not load (a status that is not JSON or names
no access state, a token that is not a JSON object) is kept as ``problem`` for the mirror
to show and ``check_tree`` to report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import history
from . import paths as p

# The token's keys, as Merritt's access service writes them (MerrittJsonKey.Access*).
TOKEN_ID = "token"
TOKEN_STATUS = "status"
TOKEN_SIZE = "cloud-content-byte"
TOKEN_NODE = "delivery-node"
TOKEN_URL = "url"
TOKEN_AVAILABLE = "anticipated-availability-time"


@dataclass(frozen=True)
class AccessItem:
    """One request of ``/access/<queue>``. ``status`` is None when MerrittZK could not load it."""

    queue: str
    qid: str
    status: str | None
    status_version: int = -1
    status_json: dict[str, Any] = field(default_factory=dict)
    token: dict[str, Any] = field(default_factory=dict)
    locked: bool = False
    lock_owner: int = 0  # the ZooKeeper session holding the ephemeral lock (0: none)
    lock_ephemeral: bool = True
    lock_ctime_ms: int = 0
    created_ms: int = 0  # the item node's ctime
    status_mtime_ms: int = 0
    children: tuple[str, ...] = ()
    history: history.History = history.ABSENT
    problems: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return p.key(self.queue, self.qid)

    @property
    def path(self) -> str:
        return p.item_path(self.queue, self.qid)

    @property
    def message(self) -> str:
        return str(self.status_json.get("message") or "")

    @property
    def last_modified(self) -> str:
        return str(self.status_json.get("last_modified") or "")

    @property
    def token_id(self) -> str:
        return _text(self.token.get(TOKEN_ID))

    @property
    def token_status(self) -> str:
        return _text(self.token.get(TOKEN_STATUS))

    @property
    def size(self) -> int | None:
        return _int(self.token.get(TOKEN_SIZE))

    @property
    def delivery_node(self) -> int | None:
        return _int(self.token.get(TOKEN_NODE))

    @property
    def url(self) -> str:
        return _text(self.token.get(TOKEN_URL))

    @property
    def anticipated_availability(self) -> str:
        return _text(self.token.get(TOKEN_AVAILABLE))

    @property
    def ark(self) -> str:
        """The object's ARK, when the token names one. Merritt's access service writes none
        today; a token that carries ``ark`` (or an ``object`` that is an ARK) is read."""
        for name in ("ark", "object"):
            value = _text(self.token.get(name))
            if value.startswith("ark:"):
                return value
        return ""

    @property
    def created(self) -> datetime | None:
        return _at(self.created_ms)

    @property
    def status_modified(self) -> datetime | None:
        return _at(self.status_mtime_ms)

    @property
    def unknown_children(self) -> tuple[str, ...]:
        return tuple(c for c in self.children if c not in p.KNOWN_CHILDREN)


def decode_status(data: bytes | None) -> tuple[str | None, dict[str, Any], str | None]:
    """(status, the whole JSON, problem) of a status node's bytes, as MerrittZK loads it:
    Java's ``loadStatus`` needs a JSON object whose ``status`` names an access state."""
    if data is None:
        return None, {}, "no status node"
    try:
        value = json.loads(data.decode())
    except (ValueError, UnicodeDecodeError):
        return None, {}, "status is not JSON"
    if not isinstance(value, dict):
        return None, {}, "status is not a JSON object"
    status = value.get("status")
    if status not in p.STATUSES:
        return None, value, f"status {status!r} is not an access state"
    return str(status), value, None


def decode_token(data: bytes | None) -> tuple[dict[str, Any], str | None]:
    """The token's JSON, as Java's ``optJsonProperty`` reads it (missing or empty: ``{}``)."""
    if data is None:
        return {}, "no token node"
    if not data:
        return {}, None
    try:
        value = json.loads(data.decode())
    except (ValueError, UnicodeDecodeError):
        return {}, "token is not JSON"
    if not isinstance(value, dict):
        return {}, "token is not a JSON object"
    return value, None


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _at(ms: int) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, tz=UTC) if ms else None
