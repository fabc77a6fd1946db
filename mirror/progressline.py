"""The progress line ``reconcile --full`` writes while it runs: a rebuild of a big tree
takes minutes, and an administrator watching it needs to see it move and when it ends.

A line every ``every`` seconds at most (and the last one always), never one per job:
items done of the total, the rate since the start, the time taken and the time left at
that rate.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class ProgressLine:
    """A rebuild's ``progress`` callback (done, total) that writes lines through ``write``."""

    def __init__(
        self,
        write: Callable[[str], None],
        every: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.write, self.every, self.clock = write, every, clock
        self.start = clock()
        self.last: float | None = None
        self.finished = False  # the rebuild tells its end more than once

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.finished:
            return
        if done < total and self.last is not None and now - self.last < self.every:
            return
        self.last, self.finished = now, done >= total
        self.write(line(done, total, now - self.start))


def line(done: int, total: int, elapsed: float) -> str:
    rate = done / elapsed if elapsed > 0 else 0.0
    left = (total - done) / rate if rate else None
    eta = duration(left) if left is not None else "unknown"
    return (
        f"reconcile --full: {done:,} of {total:,} jobs and batches read and written, "
        f"{rate:,.0f}/s, elapsed {duration(elapsed)}, ETA {eta}"
    )
