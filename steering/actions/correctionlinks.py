"""Whether the batch page offers the failed-rows round trip, and to whom its upload."""

from __future__ import annotations

from steering.actions.catalog import ACTIONS
from steering.permissions import may

ROW_TYPES = ("single-file-batch-manifest", "container-batch-manifest", "batch-manifest")


def correction_links(user, batch) -> dict:
    return {
        "rows_batch": batch.type in ROW_TYPES,
        "may_correct": may(user, ACTIONS["job.edit_resume"]),
    }
