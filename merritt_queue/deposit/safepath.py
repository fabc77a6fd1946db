"""Paths built from job data, confined to the folder they belong in whatever the tree says.

The submission door refuses unsafe names, but the workers read names from ZooKeeper, where
another system (Merritt's own ingest on the same ensemble, an older version of this queue,
a hand edit) may have written anything: every path a worker builds from a name it read goes
through ``inside``, which refuses rather than writes outside its root.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import QueueError
from .manifestvalues import file_name_problem, normalise_file_name

# The usual limit of Linux file systems on a whole path (see NAME_MAX for one name).
PATH_MAX = 4096


class UnsafePath(QueueError):
    """A name from job data would leave its folder or cannot be a file name here."""


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a file inside a job's folder, or None if it can."""
    if not isinstance(name, str):
        return f"file name {name!r} is not text"
    return file_name_problem(name)


def safe_name(name: object) -> str:
    """``name`` normalised (``./a//b`` -> ``a/b``), or UnsafePath naming the rule it breaks."""
    problem = name_problem(name)
    if problem:
        raise UnsafePath(f"{problem}; refused: a job's files must stay inside its folder")
    assert isinstance(name, str)  # name_problem refuses anything else
    return normalise_file_name(name)


def inside(root: Path, name: object) -> Path:
    """``root / name``, only if it stays inside ``root`` once symbolic links are followed."""
    root = Path(root)
    path = root.joinpath(*safe_name(name).split("/"))
    if len(os.fsencode(path)) >= PATH_MAX:
        raise UnsafePath(
            f"file name {name!r} makes a path over {PATH_MAX} bytes (the file system's limit)"
        )
    real_root = root.resolve()
    real = path.resolve()
    if real == real_root or not real.is_relative_to(real_root):
        raise UnsafePath(
            f"file name {name!r} leads outside the job's folder through a symbolic link; refused"
        )
    return path
