"""What a new version would change of an object's current one, and whether that is destructive.

The diff is the one storage makes (``versions.plan_version``), so the person reviewing sees
what Storing will do: each name added, replaced, deleted or carried, with its sizes. It is
kept in the job's ``store`` node (``core/review.py``), so its lists are capped: a job's nodes
together stay far below ZooKeeper's limit (``MAX_JOB_DATA_BYTES``), and the totals always
count every file.
"""

from __future__ import annotations

import json

from .versions import CHANGES, StoredFile, plan_version

# Names kept per change, and the most bytes the names may take in all: the rest is counted.
MAX_NAMES = 100
MAX_LIST_BYTES = 16 * 1024


def entries_as_files(entries: list[dict]) -> list[StoredFile]:
    """Processing's description of the job's files, as storage compares them."""
    return [
        StoredFile(e["name"], int(e["size"]), {"sha256": e["sha256"], "md5": e.get("md5", "")})
        for e in entries
    ]


def diff(
    current: list[StoredFile],
    submitted: list[StoredFile],
    mode: str,
    delete: list[str],
    version: int | None,
) -> dict:
    """The review record of a new version of the object whose version ``version`` holds
    ``current``: totals (files and bytes) per change, the capped name lists, and the share
    of the current version's bytes the new one replaces or deletes."""
    plan = plan_version(current, submitted, mode, delete)
    before = {f.name: f for f in current}
    after = {f.name: f for f in plan.files}
    rows: dict[str, list] = {c: [] for c in CHANGES}
    for change in plan.changes:
        old, new = before.get(change.name), after.get(change.name)
        rows[change.change].append(
            [change.name, old.size if old else None, new.size if new else None]
        )
    totals = {c: {"files": len(rows[c]), "bytes": _bytes(c, rows[c])} for c in CHANGES}
    current_bytes = sum(f.size for f in current)
    replaced_before = sum(r[1] or 0 for r in rows["replaced"])
    return {
        "version": version,
        "mode": mode,
        "current_files": len(current),
        "current_bytes": current_bytes,
        "replaced_share": round(replaced_before / current_bytes, 4) if current_bytes else 0.0,
        "totals": totals,
        "files": _capped(rows),
    }


def why_destructive(review: dict, share: float) -> list[str]:
    """Why the update must wait for a person ([] if it need not): it deletes files, or
    replaces more than ``share`` of the current version's bytes."""
    why = []
    deleted = review["totals"]["deleted"]
    if deleted["files"]:
        why.append(f"it deletes {deleted['files']} file(s), {deleted['bytes']} bytes")
    if review["current_bytes"] and review["replaced_share"] > share:
        why.append(
            f"it replaces {review['replaced_share']:.0%} of the object's bytes "
            f"(more than {share:.0%})"
        )
    return why


def _bytes(change: str, rows: list) -> int:
    """The bytes of a change: what was there for a deletion, what will be for the others."""
    index = 1 if change == "deleted" else 2
    return sum(r[index] or 0 for r in rows)


def _capped(rows: dict[str, list]) -> dict:
    """The name lists, at most ``MAX_NAMES`` each and ``MAX_LIST_BYTES`` in all, the
    destructive changes first; ``left_out`` counts the names not kept."""
    kept: dict = {c: [] for c in CHANGES}
    left_out = 0
    room = MAX_LIST_BYTES
    for change in ("deleted", "replaced", "added", "carried"):
        for row in rows[change]:
            size = len(json.dumps(row))
            if len(kept[change]) >= MAX_NAMES or size > room:
                left_out += 1
                continue
            room -= size
            kept[change].append(row)
    kept["left_out"] = left_out
    return kept
