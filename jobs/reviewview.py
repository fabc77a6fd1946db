"""The job page's account of a destructive update: what it would change of the object's
current version (``merritt_queue.core.review``), and who decided what, once decided."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from merritt_queue.core import review

# The changes in the order a reviewer reads them: what is lost first.
ORDER = (
    ("deleted", "Deleted"),
    ("replaced", "Replaced"),
    ("added", "Added"),
    ("carried", "Carried"),
)


def without_review(store: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The store node as the page's Store section shows it: the review has its own section."""
    if not store or review.KEY not in store:
        return store
    return {k: v for k, v in store.items() if k != review.KEY}


def review_context(store: Mapping[str, Any] | None, awaiting: bool) -> dict | None:
    diff = (store or {}).get(review.KEY)
    if not isinstance(diff, dict):
        return None
    totals = diff.get("totals") or {}
    files = diff.get("files") or {}
    changes = [
        {
            "change": change,
            "label": label,
            "files": (totals.get(change) or {}).get("files", 0),
            "bytes": (totals.get(change) or {}).get("bytes", 0),
            "rows": files.get(change) or [],
        }
        for change, label in ORDER
    ]
    return {
        "diff": diff,
        "changes": changes,
        "left_out": files.get("left_out", 0),
        "why": diff.get("why") or [],
        "share": diff.get("replaced_share", 0),
        "awaiting": awaiting,
    }
