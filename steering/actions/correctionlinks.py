"""Whether the batch page offers the failed-rows round trip, and to whom its upload."""

from __future__ import annotations

from steering.actions.catalog import ACTIONS
from steering.permissions import collections_of, may

ROW_TYPES = ("single-file-batch-manifest", "container-batch-manifest", "batch-manifest")


def correction_links(user, batch) -> dict:
    """A batch of rows with failed jobs offers them; the upload only to an operator who may
    act on its collection (the corrections page refuses the others)."""
    failed = int((batch.job_counts or {}).get("Failed", 0) or 0)
    scope = collections_of(user)
    return {
        "rows_batch": batch.type in ROW_TYPES and failed > 0,
        "may_correct": may(user, ACTIONS["job.edit_resume"])
        and (scope is None or batch.collection in scope),
    }
