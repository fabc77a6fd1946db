"""The characters an identifier may hold: what becomes a file name, a ZooKeeper node's name or
a storage key (local ids, ARKs, batch ids, file names) is printable, assigned text.

Refused: control characters, private-use characters, surrogates and code points Unicode
leaves unassigned (none has a meaning a librarian could read back, and ZooKeeper refuses
several of them in a node's name), and whatever else ZooKeeper refuses in a node's name
(``core.nodenames``), which a local id becomes in its lock.
"""

from __future__ import annotations

import unicodedata

from ..core.nodenames import refused_character

_KINDS = {
    "Cc": "a control character",
    "Co": "a private-use character",
    "Cs": "a surrogate",
    "Cn": "an unassigned code point",
}


def character_problem(label: str, value: str, *, node: bool = False) -> str | None:
    """Why ``value`` (given as ``label``) holds a character no identifier may, or None;
    ``node``: the value also names a ZooKeeper node (a local id, an ARK)."""
    for ch in value:
        kind = _KINDS.get(unicodedata.category(ch))
        if kind is not None:
            return f"{label} holds U+{ord(ch):04X}, {kind}; identifiers are printable text"
    if node and (refused := refused_character(value)) is not None:
        return (
            f"{label} holds U+{ord(refused):04X}, a character ZooKeeper refuses in a node's name "
            "(a lock is named after it)"
        )
    return None
