"""Fair shares of new work: within one priority, batches take turns.

The index serves jobs in ``PP-JID`` order, so at equal priority every job of a batch
submitted first would start before any job of one submitted after it: one collection's big
batch could hold back everyone else's for hours. The dispatcher therefore hands Pending
jobs out by turns: within a priority, the next job comes from the batch that has been
handed the fewest so far. A batch that appears starts level with the least-served batch
present (not at zero, which would starve the batches already running). Higher priorities
still go first, each batch's own jobs keep their order, and a lone batch is served exactly
in ``PP-JID`` order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence


class Turns:
    """How many Pending jobs each batch present has been handed, to give out the next."""

    def __init__(self) -> None:
        self.served: dict[str | None, int] = {}

    def order(
        self,
        listed: Sequence[tuple[int, str]],
        batch_of: Mapping[str, str | None],
        queued: Collection[str] = (),
    ) -> list[tuple[int, str]]:
        """The ``listed`` ``(priority, jid)`` not in ``queued``, in the order to hand out.

        ``listed`` is the whole Pending index in ``PP-JID`` order; ``queued`` jobs are handed
        out already (and keep their batch counted as present).
        """
        present: dict[str | None, int] = {}  # batch -> order of its first listed job
        for _, jid in listed:
            present.setdefault(batch_of.get(jid), len(present))
        known = [self.served[b] for b in present if b in self.served]
        floor = min(known) if known else 0
        self.served = {b: self.served.get(b, floor) for b in present}
        candidates = [e for e in listed if e[1] not in queued]
        if len(present) <= 1:
            return candidates
        nth: dict[tuple[int, str | None], int] = {}  # a batch's jobs so far, per priority
        ranked = []
        for entry in candidates:
            batch = batch_of.get(entry[1])
            k = nth[entry[0], batch] = nth.get((entry[0], batch), -1) + 1
            ranked.append(((entry[0], self.served[batch] + k, present[batch]), entry))
        ranked.sort(key=lambda r: r[0])
        return [entry for _, entry in ranked]

    def handed(self, batch: str | None) -> None:
        """``batch``'s job was handed out (enqueued)."""
        self.served[batch] = self.served.get(batch, 0) + 1
