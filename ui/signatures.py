"""An error message's signature: its text with the parts that differ between jobs masked.

"digest mismatch: md5 expected 3f2a… got 9b41…" and the same error with other digests are
one cause; grouping failed jobs by exact text would split it into as many rows as there are
files. The signature masks URLs, ARKs, job and batch ids, UUIDs, digests and numbers, so that
the dashboard counts causes and the job list finds every job of one cause again, both from
the mirror's indexed ``Job.signature`` column (``cause_of``).
"""

from __future__ import annotations

import re

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


def signature(message: str) -> str:
    """``"HTTP 404 at https://x/a.zip"`` -> ``"HTTP <n> at <url>"``; whitespace collapsed."""
    masked = _MASK.sub(lambda m: f"<{m.lastgroup}>", message or "")
    return " ".join(masked.split())


# The signature of a job without a message: a value of its own, so that its cause links to
# its jobs (an empty filter would select every failed job).
NO_MESSAGE = "<none>"
# The length of the mirror's ``Job.signature`` column; a longer signature is cut there.
SIGNATURE_MAX = 255


def cause_of(message: str) -> str:
    """The value of ``Job.signature``: the message's signature, ``<none>`` without one, cut
    to the column. Computed once per status write by the mirror (``mirror.rows``), so that a
    cause is counted and found by an index, never by reading every message again."""
    return (signature(message) or NO_MESSAGE)[:SIGNATURE_MAX]
