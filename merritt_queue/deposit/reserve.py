"""What a file of undeclared size reserves on the working disk, and so where its download stops.

Nobody said how big it is (no size in the manifest, no ``Content-Length`` to a HEAD), so
Estimating reserves a figure for it and Downloading stops it there: reserved and allowed
are one figure. The figure is half the room left on the working disk under
``MQ_DISK_THRESHOLD`` when the job is estimated, shared by its files of undeclared size, and
at most the per-file cap ``MQ_MAX_DOWNLOAD_BYTES`` (0: no cap). Half, so that Provisioning
can grant it even after the disk has filled a little since, and jobs after it still find
room; a reservation of the whole cap would wait for ever on a disk that never has that
much free. Downloading does not measure the room again (other jobs change it): it takes
the figure back from the job's own ``space_needed``, ``undeclared_each``.
"""

from __future__ import annotations

import os
from pathlib import Path


def undeclared_reserve(path: Path, cap: int, threshold: float, count: int) -> int:
    """Bytes reserved for each of ``count`` files of undeclared size on ``path``'s disk; 0
    when the disk is already at its threshold."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    used = total - st.f_bavail * st.f_frsize
    room = max(0, int(total * threshold / 100) - used)
    each = room // 2 // max(1, count)
    return min(cap, each) if cap > 0 else each


def undeclared_each(space_needed: int, sizes: list[int | None]) -> int | None:
    """What Estimating reserved for each file of ``sizes`` that has none, from the job's
    ``space_needed``; None when it reserved nothing for them (a job estimated before
    undeclared sizes were reserved, or one with none)."""
    unknown = sum(size is None for size in sizes)
    if not unknown:
        return None
    each = (space_needed - sum(size or 0 for size in sizes)) // unknown
    return each if each > 0 else None
