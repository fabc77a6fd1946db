"""Why an item was skipped because it changed after its confirmation page was shown: what
changed and by whom, from its history node (``core.history``), not only the status it has now
(a job resumed and failed again is Failed both times, and "it is now Failed" explains nothing).
"""

from __future__ import annotations

from merritt_queue.core import history as h

SHOWN = 3  # the latest changes named; older ones are counted


def who(by: str) -> str:
    """The person or process behind an entry's ``by``, as a sentence names it."""
    if by.startswith(h.ADMIN_PREFIX):
        return by[len(h.ADMIN_PREFIX) :]
    if by.startswith(h.WORKER_PREFIX):
        return f"a worker ({by[len(h.WORKER_PREFIX) :]})"
    if by.startswith(h.DISPATCHER_PREFIX):
        return "the dispatcher"
    if by.startswith(h.SUBMISSION_PREFIX):
        return f"the submission of {by[len(h.SUBMISSION_PREFIX) :]}"
    return by or "a writer this queue does not know"


def _change(entry: h.Entry) -> str:
    moved = (
        f"{entry.from_status} → {entry.to_status}"
        if entry.from_status != entry.to_status
        else f"{entry.to_status} written again"
    )
    said = f" (“{entry.message}”)" if entry.message else ""
    return f"{moved} by {who(entry.by)} at {entry.at}{said}"


def changed_since(shown: int, status: str, version: int | None, hist: h.History | None) -> str:
    """``changed since the page was shown`` with what the item's history says of each write
    after version ``shown``; writes it has no entry for are another writer's (Merritt's own
    ingest writes none)."""
    now = f"it is now {status} (version {version}, the page showed version {shown})"
    if hist is None or version is None:
        return f"changed since the page was shown: {now}"
    later = [e for e in hist.entries if shown < e.version <= version]
    unknown = version - shown - len(later)
    parts = [_change(e) for e in later[-SHOWN:]]
    if len(later) > SHOWN:
        parts.insert(0, f"{len(later) - SHOWN} earlier change(s)")
    if unknown > 0:
        parts.append(f"{unknown} write(s) by another writer ({h.OTHER_WRITER}), with no history")
    return f"changed since the page was shown: {'; '.join(parts)}; {now}"
