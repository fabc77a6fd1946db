"""An error message's signature: its text with the parts that differ between jobs masked.

"digest mismatch: md5 expected 3f2a… got 9b41…" and the same error with other digests are
one cause; grouping failed jobs by exact text would split it into as many rows as there are
files. The signature masks URLs, ARKs, job and batch ids, UUIDs, digests and numbers, so that
the dashboard counts causes, and the job list can find every job of one cause again
(``signature_q``: a regular expression that both SQLite and PostgreSQL evaluate).
"""

from __future__ import annotations

import re

from django.db.models import Q

# Masked in this order: a URL or an ARK may hold ids, digests and numbers of its own.
MASKS = (
    ("url", r"[a-z][a-z0-9+.-]*://[^\s\"'<>]+"),
    ("ark", r"ark:/?[0-9]+/[^\s\"'<>]+"),
    ("uuid", r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    ("id", r"\b(?:jid|bid)[0-9]+\b"),
    ("hex", r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"),
    ("n", r"\b[0-9]+(?:\.[0-9]+)?\b"),
)
_MASK = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in MASKS), re.IGNORECASE)
# What each placeholder stands for in the database's regular expression: a loose version
# of the mask (no lookaheads or word boundaries, which the two databases spell apart).
_SQL = {
    "url": r"[a-zA-Z][-a-zA-Z0-9+.]*://[^ ]+",
    "ark": r"[aA][rR][kK]:/?[0-9]+/[^ ]+",
    "uuid": r"[-0-9a-fA-F]+",
    "id": r"[jb]id[0-9]+",
    "hex": r"[0-9a-fA-F]+",
    "n": r"[0-9]+(\.[0-9]+)?",
}
_PLACEHOLDER = re.compile("<(" + "|".join(name for name, _ in MASKS) + ")>")


def signature(message: str) -> str:
    """``"HTTP 404 at https://x/a.zip"`` -> ``"HTTP <n> at <url>"``; whitespace collapsed."""
    masked = _MASK.sub(lambda m: f"<{m.lastgroup}>", message or "")
    return " ".join(masked.split())


def signature_regex(sig: str) -> str:
    """A regular expression matching the messages whose signature is ``sig``: its text
    literally, each placeholder as what it masked, any run of whitespace as whitespace."""
    parts = []
    for i, piece in enumerate(_PLACEHOLDER.split(sig)):
        if i % 2:
            parts.append(_SQL[piece])
        else:
            parts.append(r"\s+".join(re.escape(word) for word in piece.split(" ")))
    return "^\\s*" + "".join(parts) + "\\s*$"


def signature_q(sig: str) -> Q:
    """The jobs whose message has the signature ``sig`` (an empty one: no message)."""
    sig = " ".join(sig.split())
    if not sig:
        return Q(message="")
    return Q(message__regex=signature_regex(sig))
