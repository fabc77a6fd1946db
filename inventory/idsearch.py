"""Identifiers as a person types them, matched by indexed prefixes of normalised columns.

A librarian pastes ``https://n2t.net/ark:/99999/fk4abc``, types ``ARK:/99999/FK4ABC``, the bare
``fk4abc``, the start of it, or a local id in another case. Each object keeps its ARK
normalised (``ark_key``: ``99999/fk4abc``, lower case, resolver and ``ark:/`` removed) and the
ARK's name alone (``ark_name``: ``fk4abc``); each local id keeps its lower-case form
(``local_key``). A search matches the start of those columns, which their indexes serve
(``LIKE 'x%'`` on PostgreSQL by the ``varchar_pattern_ops`` index Django makes for an indexed
``CharField``, a range on SQLite's binary-ordered index), so it stays a seek on a million
objects. A part from the middle of an identifier is not matched: that would read every row.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from django.db import connection
from django.db.models import Q

# Where an ARK starts in a link to a resolver (n2t.net, arks.org, a Merritt page) or in text.
_ARK_START = re.compile(r"ark:/?", re.IGNORECASE)
_RESOLVER = re.compile(r"^[a-z][a-z0-9+.-]*://[^/]+/", re.IGNORECASE)
# Past every character an identifier holds: the end of a prefix range on SQLite.
_LAST = "\U0010ffff"


def names_ark(text: str) -> bool:
    """Whether ``text`` is an ARK or a link (a resolver's, a Merritt page's) rather than
    words: ``normalised`` then makes it the ARK's key."""
    return bool(_ARK_START.search(text) or _RESOLVER.match(text.strip()))


def normalised(text: str) -> str:
    """``text`` as an ARK key: lower case, without a resolver's address, ``ark:`` or ``ark:/``,
    percent-escapes decoded (a Merritt link spells ``ark:%2F99999%2Ffk4abc``)."""
    value = unquote(text.strip())
    if found := _ARK_START.search(value):
        value = value[found.end() :]
    else:
        value = _RESOLVER.sub("", value)
    return value.strip().strip("/").lower()


def ark_keys(ark: str) -> tuple[str, str]:
    """The object's ``ark_key`` and ``ark_name``: ``ark:/99999/fk4abc`` -> ``99999/fk4abc``,
    ``fk4abc``."""
    key = normalised(ark)
    return key, key.partition("/")[2]


def local_key(local_id: str) -> str:
    return local_id.strip().lower()


def starts_with(column: str, prefix: str) -> Q:
    """Rows whose ``column`` starts with ``prefix``, as its index serves it on this database."""
    if connection.vendor == "sqlite":
        # SQLite's LIKE is not served by a binary-collated index; a range is.
        return Q(**{f"{column}__gte": prefix, f"{column}__lt": prefix + _LAST})
    return Q(**{f"{column}__startswith": prefix})


def ark_match(text: str) -> Q | None:
    """Objects whose ARK starts with what ``text`` normalises to, or whose ARK's name does (a
    bare ``fk4...``); None when nothing is left to match."""
    key = normalised(text)
    if not key:
        return None
    found = starts_with("ark_key", key)
    return found if "/" in key else found | starts_with("ark_name", key)
