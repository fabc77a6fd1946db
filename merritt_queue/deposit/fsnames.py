"""The file system's limit on one name, which every name built from a depositor's value
meets: a file's own name with the suffix it is downloaded under, an ARK escaped for storage.
"""

from __future__ import annotations

import os
from urllib.parse import quote, unquote

from .idtext import character_problem

# The usual limit of Linux file systems (ext4, xfs) on one name, in bytes of the encoded name:
# beyond it the kernel answers ENAMETOOLONG, which would reach a librarian as an internal
# error.
NAME_MAX = 255
# What a download's name gets while it is written: the door leaves room for it in a file
# name (``manifestvalues.file_name_problem``).
PART_SUFFIX = ".part"


def escape_ark(ark: str) -> str:
    """A directory name for ``ark``: percent-encoding, so ``unescape_ark`` reverses it."""
    return quote(ark, safe="")


def unescape_ark(name: str) -> str:
    return unquote(name)


# An object's lock file is its escaped ARK with this after it (``LocalStorage._lock``).
LOCK_SUFFIX = ".lock"


def ark_name_problem(ark: str, label: str = "primary_id") -> str | None:
    """Why ``ark`` cannot name what storage makes of it, or None: printable characters (its
    lock in ZooKeeper is named after it), and an escaped name (``escape_ark``) with
    ``LOCK_SUFFIX`` within the file system's limit on one name."""
    shown = ark[:100]
    if problem := character_problem(f"{label} {shown!r}", ark, node=True):
        return problem
    size = len(os.fsencode(escape_ark(ark) + LOCK_SUFFIX))
    if size > NAME_MAX:
        return (
            f"{label} {shown!r} is too long once escaped for storage: {size} bytes with its "
            f"lock file's {LOCK_SUFFIX!r}, over the file system's limit of {NAME_MAX} "
            "('%', '/' and non-ASCII characters take 3 bytes or more each)"
        )
    return None
