"""Re-run batches in the store: each under the next free ``<batchID>~rerun-<n>``."""

from __future__ import annotations

from .. import rerun
from ..records import Created
from .batches import BatchStore

# Re-run numbers tried past the last one found, for creators racing for the same number.
TRIES = 5


class Reruns(BatchStore):
    """Re-run batches of ``QueueStore``."""

    def latest_rerun(self, base: str) -> tuple[int, str | None]:
        """The highest ``n`` whose ``<base>~rerun-<n>`` names a batch, and that batch (0 and
        None when there is none). Numbers are taken in order, one read each."""
        n, bid = 0, None
        while found := self.find_batch_by_uuid(rerun.rerun_uuid(base, n + 1)):
            n, bid = n + 1, found
        return n, bid

    def create_rerun_batch(self, base: str, submission: dict) -> Created:
        """Create ``submission`` as a new reserved batch under the next free re-run batchID
        of ``base``; its ``/batch-uuids`` entry is made in the same multi, as any batch's.
        The old batch and its entry are untouched."""
        n, _ = self.latest_rerun(base)
        for k in range(n + 1, n + 1 + TRIES):
            created = self.create_batch(
                submission | {"batchID": rerun.rerun_uuid(base, k)}, reserved=True
            )
            if not created.duplicate:
                return created
        raise RuntimeError(f"no free re-run batchID for {base} after {TRIES} tries")
