"""What ZooKeeper accepts in a node's name: the rule of its server (``PathUtils.validatePath``).

The server refuses a path holding certain UTF-16 code units, whatever client sent it, and
kazoo checks nothing of the kind: a name built from a depositor's value (a local id in a
lock's name) that breaks the rule fails only when the node is made, as an internal error.
The door judges such values by this rule (``deposit.idtext``), and ``tree.lock_name``
again, so a value from a tree another writer filled fails its job with the rule named.

The server judges UTF-16 code units, so a character outside the Basic Multilingual Plane
(an emoji) is refused as the surrogate pair it is sent as.
"""

from __future__ import annotations

# The server's ranges, exclusive at both ends as it writes them (``c > a && c < b``).
_REFUSED_BETWEEN = ((0x0000, 0x001F), (0x007F, 0x009F), (0xD800, 0xF8FF), (0xFFF0, 0xFFFF))


def refused_character(name: str) -> str | None:
    """The first character of ``name`` ZooKeeper refuses in a node's name, or None."""
    for ch in name:
        if ch == "\0" or any(_refused_unit(unit) for unit in _utf16_units(ch)):
            return ch
    return None


def node_name_problem(name: str) -> str | None:
    """Why ZooKeeper would refuse ``name`` as one node's name, or None."""
    if name in ("", ".", ".."):
        return f"{name!r} cannot name a ZooKeeper node"
    if (ch := refused_character(name)) is not None:
        return f"it holds U+{ord(ch):04X}, a character ZooKeeper refuses in a node's name"
    return None


def _utf16_units(ch: str) -> tuple[int, ...]:
    code = ord(ch)
    if code < 0x10000:
        return (code,)
    code -= 0x10000
    return (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))


def _refused_unit(unit: int) -> bool:
    return any(low < unit < high for low, high in _REFUSED_BETWEEN)
