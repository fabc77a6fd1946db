"""What a file of undeclared size reserves on the working disk, and so where its download stops.

Nobody said how big it is (no size in the manifest, no ``Content-Length`` to a HEAD), so
Estimating reserves this for it and Downloading stops it there: reserved and allowed are one
figure. It is the per-file cap, ``MQ_MAX_DOWNLOAD_BYTES``, bounded by the most the working
disk may ever hold under ``MQ_DISK_THRESHOLD``, so a cap larger than the disk (a system
check warns of it) reserves no more than the disk has; a cap of 0 (no limit) reserves that
much too.
"""

from __future__ import annotations

import os
from pathlib import Path


def undeclared_reserve(path: Path, cap: int, threshold: float) -> int:
    """Bytes reserved for one file of undeclared size on ``path``'s disk."""
    st = os.statvfs(path)
    share = int(st.f_blocks * st.f_frsize * threshold / 100)
    return min(cap, share) if cap > 0 else share
