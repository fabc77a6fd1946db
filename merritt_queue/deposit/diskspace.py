"""How full the working disk would be: what the queue's disk threshold is measured against.

Measured with what this process can still write (``f_bavail``), not what the file system
has free (``f_bfree``): blocks reserved for root, and any quota below the device's size,
are as unusable to a worker as blocks in use, so they count as used.
"""

from __future__ import annotations

import os
from pathlib import Path


def percent_used_after(path: Path, extra: int) -> float:
    """The percentage of ``path``'s disk unusable to us once ``extra`` more bytes are written."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    available = st.f_bavail * st.f_frsize
    return 100.0 * (total - available + extra) / total


def percent_of_disk(path: Path, size: int) -> float:
    """The percentage of ``path``'s whole disk that ``size`` bytes take."""
    st = os.statvfs(path)
    return 100.0 * size / (st.f_blocks * st.f_frsize)


def used_and_total(path: Path) -> tuple[int, int]:
    """Bytes of ``path``'s disk unusable to us (as ``percent_used_after`` counts them), and
    the disk's size."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    return total - st.f_bavail * st.f_frsize, total
