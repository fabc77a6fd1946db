"""Paths built from job data, confined to the folder they belong in whatever the tree says.

The submission door refuses unsafe names, but the workers read names from ZooKeeper, where
another system (Merritt's own ingest on the same ensemble, an older version of this queue,
a hand edit) may have written anything: every path a worker builds from a name it read goes
through ``inside`` (or ``inside_each``, the same for many names), which refuses rather than
writes outside its root.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
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
    path, _ = _joined(root, name)
    real_root = root.resolve()
    real = path.resolve()
    if real == real_root or not real.is_relative_to(real_root):
        raise UnsafePath(
            f"file name {name!r} leads outside the job's folder through a symbolic link; refused"
        )
    return path


def inside_each(root: Path, names: Iterable[object]) -> list[Path]:
    """``[inside(root, name) for name in names]``, the same paths and the same refusals, for
    less: ``inside`` follows every part of both paths, root's ancestors included, for each
    name. A path none of whose parts below ``root`` is a symbolic link is where it is built,
    inside ``root`` wherever ``root`` really is; so each part is ``lstat``-ed (a folder once
    for all its names) and only a name with a link among its parts is followed, by ``inside``.
    """
    root = Path(root)
    folders: set[str] = set()  # the parts below root seen to be no symbolic link
    paths: list[Path] = []
    for name in names:
        if not paths:  # a root that cannot be resolved (a link loop) fails as in ``inside``
            root.resolve()
        path, parts = _joined(root, name)
        if _has_link(os.fspath(root), parts, folders):
            path = inside(root, name)
        paths.append(path)
    return paths


def _joined(root: Path, name: object) -> tuple[Path, list[str]]:
    parts = safe_name(name).split("/")
    path = root.joinpath(*parts)
    if len(os.fsencode(path)) >= PATH_MAX:
        raise UnsafePath(
            f"file name {name!r} makes a path over {PATH_MAX} bytes (the file system's limit)"
        )
    return path, parts


def _has_link(root: str, parts: list[str], folders: set[str]) -> bool:
    """Whether a part of ``root/parts`` below ``root`` is a symbolic link. A part that cannot
    be read is no link, as ``Path.resolve`` takes it."""
    path = root
    for i, part in enumerate(parts):
        path = os.path.join(path, part)
        if path in folders:
            continue
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            return True
        if i < len(parts) - 1:
            folders.add(path)
    return False
