"""A pre-flight summary shrunk to fit an ``approval`` node (``core.approval``).

ZooKeeper refuses a node past about 1 MB, and every read of an awaiting batch carries it, so
the summary is kept under a limit. A batch too big for that is the one an operator most
needs to see: its figures and ``counts`` are always kept, and only its lists shrink, step by
step: long texts (a title, a URL, an error) cut, a duplicate local id's ``lines`` capped,
then each list halved until it fits. ``left_out`` says how many entries each list lost.
Only a summary that is still too big with empty lists is given up.
"""

from __future__ import annotations

from typing import Any

from . import tree as t

# The lists of ``batches.preflight``'s summary; everything else is a figure kept whole.
LISTS = ("sample", "duplicate_local_ids", "updates", "in_flight")
TEXT_CUT = 80
LINES_CUT = 10
LEFT_OUT = "left_out"


def size(summary: dict[str, Any]) -> int:
    return len(t.encode_json(summary))


def fit(summary: dict[str, Any], limit: int) -> dict[str, Any] | None:
    """``summary`` as it is when it fits in ``limit`` bytes, else a shrunk copy that does,
    else None."""
    if size(summary) <= limit:
        return summary
    lists = {k: [_cut(e) for e in summary[k]] for k in LISTS if isinstance(summary.get(k), list)}
    keep = max((len(v) for v in lists.values()), default=0)
    while True:
        kept = {k: v[:keep] for k, v in lists.items()}
        left = {k: len(v) - len(kept[k]) for k, v in lists.items() if len(v) > len(kept[k])}
        shrunk = summary | kept | {LEFT_OUT: left}
        if size(shrunk) <= limit:
            return shrunk
        if keep == 0:
            return None
        keep //= 2


def _cut(entry: object) -> object:
    if not isinstance(entry, dict):
        return entry
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if isinstance(value, str) and len(value) > TEXT_CUT:
            value = value[: TEXT_CUT - 1] + "…"
        elif key == "lines" and isinstance(value, list) and len(value) > LINES_CUT:
            out["more_lines"] = len(value) - LINES_CUT
            value = value[:LINES_CUT]
        out[key] = value
    return out
