"""Directory entries made durable: a new file or directory survives a crash only once the
directory holding its name is fsynced, not the file alone."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path) -> bool:
    """``path`` and any missing parents, each new one fsynced into its parent; True when
    ``path`` was made here."""
    try:
        path.mkdir()
    except FileExistsError:
        return False
    except FileNotFoundError:
        make_dirs(path.parent)
        try:
            path.mkdir()
        except FileExistsError:
            return False
    fsync_dir(path.parent)
    return True
