"""The ``steps`` node: what each attempt at a job's steps did, kept beside its ``history``.

``/jobs/JID/steps`` holds one summary per attempt (the step, the status version it ran at,
who ran it, when, how long, how it ended and the entries its ``steplog.StepLog`` got),
oldest first. It is written in the same multi as the step's outcome, so it costs no write
of its own, and for an attempt abandoned without a commit, alone, while the attempt's
fence still passes (``store.stepwrites``).

Why this shape:

- Not in the status or job nodes: the dispatcher and every mover read those; this node is
  read only with a whole job (the worker that locked it, a page's rebuild).
- One node rewritten whole, like ``history``: one read per job for a rebuild.
- Bounded at ``MAX_BYTES``: the oldest attempts go first, counted in ``dropped`` with their
  entries in ``dropped_entries``; the newest attempt is always kept, its later entries cut
  (counted in its ``more``) if it alone is too big. Entries are bounded as they are made
  (``steplog``).
- MerrittZK never reads it and removes it with the job (its deletes are recursive).
- Decoding never raises: a damaged node reads as empty (``damaged``), and the next write
  starts it afresh.

``public`` is what a depositor may read of it: their content's URLs, statuses, bytes,
digests and the ARK; never an address reached, an internal service's URL or its answer.

Pure: no client and no I/O, like ``history``.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

NODE = "steps"
FORMAT = 1
MAX_BYTES = 32 * 1024
MAX_ATTEMPTS = 50
MAX_MESSAGE = 500


@dataclass(frozen=True)
class StepRecord:
    """A job's ``steps`` node as read, or as this store last wrote it."""

    attempts: tuple[dict[str, Any], ...] = ()
    exists: bool = False
    dropped: int = 0
    dropped_entries: int = 0
    damaged: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "dropped": self.dropped,
            "dropped_entries": self.dropped_entries,
            "attempts": list(self.attempts),
        }


ABSENT = StepRecord()


def summary(
    *,
    step: str,
    version: int,
    attempt: str,
    by: str,
    at: str,
    took: float,
    outcome: str,
    to: str = "",
    message: str = "",
    entries: list[dict[str, Any]],
    more: int = 0,
) -> dict[str, Any]:
    """One attempt as the node keeps it."""
    return {
        "step": step,
        "v": version,
        "attempt": attempt,
        "by": by,
        "at": at,
        "took": round(took, 3),
        "outcome": outcome,
        "to": to,
        "msg": message[:MAX_MESSAGE],
        "entries": entries,
        "more": more,
    }


def decode(data: bytes | None, exists: bool = True) -> StepRecord:
    """The record in ``data`` (a node's bytes); never raises (see the module)."""
    if not exists:
        return ABSENT
    if not data:
        return StepRecord(exists=True)
    try:
        return from_json(json.loads(data.decode()))
    except ValueError:
        return StepRecord(exists=True, damaged=True)


def from_json(value: Any) -> StepRecord:
    """The record ``as_json`` gave (the mirror keeps it so); damaged when it is not one."""
    try:
        attempts = tuple(a for a in value["attempts"] if isinstance(a, dict))
        return StepRecord(
            attempts,
            exists=True,
            dropped=max(int(value.get("dropped", 0)), 0),
            dropped_entries=max(int(value.get("dropped_entries", 0)), 0),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return StepRecord(exists=True, damaged=True)


def encode(record: StepRecord) -> bytes:
    return json.dumps(record.as_json(), separators=(",", ":"), ensure_ascii=False).encode()


def append(record: StepRecord, attempt: dict[str, Any]) -> tuple[StepRecord, bytes]:
    """``record`` with ``attempt`` added last, within the bounds, and its node's bytes."""
    kept = [a for a in record.attempts if a.get("attempt") != attempt.get("attempt")]
    kept.append(attempt)
    dropped, lost = record.dropped, record.dropped_entries
    while len(kept) > MAX_ATTEMPTS:
        dropped, lost = dropped + 1, lost + _weight(kept.pop(0))
    new = StepRecord(tuple(kept), True, dropped, lost)
    data = encode(new)
    while len(data) > MAX_BYTES and len(kept) > 1:
        cut = max(1, len(kept) // 4)
        dropped += cut
        lost += sum(_weight(a) for a in kept[:cut])
        kept = kept[cut:]
        new = StepRecord(tuple(kept), True, dropped, lost)
        data = encode(new)
    while len(data) > MAX_BYTES and kept[-1]["entries"]:
        last = dict(kept[-1])
        entries = last["entries"]
        keep = len(entries) // 2
        last["more"] = int(last.get("more") or 0) + len(entries) - keep
        last["entries"] = entries[:keep]
        kept[-1] = last
        new = StepRecord(tuple(kept), True, dropped, lost)
        data = encode(new)
    return new, data


def _weight(attempt: dict[str, Any]) -> int:
    return len(attempt.get("entries") or ()) + int(attempt.get("more") or 0)


# --- what a depositor may read ---------------------------------------------------------

# Per kind of entry, the fields that concern the depositor's own content. A kind not named
# here (a call to an internal service whose answer says nothing of theirs) is left out,
# and so is every field not named: the address a download reached, a service's URL, its
# answer's excerpt.
PUBLIC_FIELDS: dict[str, tuple[str, ...]] = {
    "head": ("url", "http", "bytes", "ms", "error"),
    "get": ("url", "try", "http", "bytes", "ms", "retry", "error"),
    "copy": ("file", "bytes"),
    "digest": ("file", "expected", "computed", "ok"),
    "unpacked": ("file", "count", "names", "bytes"),
    "bag": ("file", "valid", "algorithms", "mismatched", "missing", "extra", "problems"),
    "bag-info": ("ignored", "problem"),
    "ark": ("ark", "how"),
    "storage": ("ark", "version", "files", "ok", "unchanged"),
    "inventory": ("ark", "version", "ok"),
    "minter": ("ark", "ok", "changed"),
    "callback": ("http", "ok"),
    "notification": ("to", "channel", "ok"),
}
# Fields whose text an error may have written: an address in it is not theirs to read. An
# attempt's message is left out whole: a step's message may name a service's URL.
_SCRUBBED = ("error", "retry")
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
# A word of hex digits and at least two colons may be an IPv6 address, compressed or not;
# ``ipaddress`` decides (a time, 10:02:07, is none).
_IPV6_WORD = re.compile(
    r"\[?(?<![\w:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%\w+)?(?![\w:])\]?"
)


def scrub(text: str) -> str:
    """``text`` with every IP address in it replaced."""
    return _IPV6_WORD.sub(_v6, _IPV4.sub("(address)", text))


def _v6(word: re.Match) -> str:
    try:
        ipaddress.IPv6Address(word.group(0).strip("[]").split("%")[0])
    except ValueError:
        return word.group(0)
    return "(address)"


def public(record: StepRecord) -> dict[str, Any]:
    """What a depositor may read of the record (see ``PUBLIC_FIELDS``)."""
    attempts = []
    for a in record.attempts:
        entries = []
        for e in a.get("entries") or ():
            fields = PUBLIC_FIELDS.get(str(e.get("k")))
            if fields is None:
                continue
            shown = {"kind": e["k"]}
            for name in fields:
                if name in e:
                    value = e[name]
                    shown[name] = (
                        scrub(value) if name in _SCRUBBED and isinstance(value, str) else value
                    )
            entries.append(shown)
        attempts.append(
            {
                "step": a.get("step", ""),
                "at": a.get("at", ""),
                "took": a.get("took"),
                "outcome": a.get("outcome", ""),
                "to": a.get("to", ""),
                "entries": entries,
            }
        )
    return {"attempts": attempts, "attempts_dropped": record.dropped}
