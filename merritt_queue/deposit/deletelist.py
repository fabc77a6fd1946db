"""An update's delete list, and the ``store`` node's mode, as Merritt's ingest writes them.

A depositor asks an update to remove files of the object's current version with
``mrt-delete.txt`` among the submitted files: one name a line, relative to ``producer/``
(Merritt's HandlerDescribe moves it to ``system/``, HandlerTransfer prefixes each name with
``producer/`` unless it has it). The job's ``store`` node then holds the list as one string,
a name a line, and its ``mode`` as Merritt's storage path: ``add/<node>/<ark>`` or
``update/<node>/<ark>`` (the ARK percent-encoded). Either side's Storing step must read what
the other wrote, so both shapes are parsed here and nowhere else.
"""

from __future__ import annotations

from urllib.parse import quote

from .manifest import ManifestError
from .safepath import name_problem

DELETE_FILE = "mrt-delete.txt"
ACTIONS = ("add", "update")
# A delete list is read whole into ZooKeeper's store node; beyond this it is not a list of
# names but something else, refused before it reaches the tree.
MAX_DELETE_BYTES = 256 * 1024
_MAX_PROBLEMS = 20


def parse_delete_file(data: bytes) -> list[str]:
    """The stored names (``producer/...``) a delete file lists; ManifestError if any is unsafe."""
    if len(data) > MAX_DELETE_BYTES:
        raise ManifestError(
            [f"{DELETE_FILE} is {len(data)} bytes, over the limit of {MAX_DELETE_BYTES}"]
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ManifestError([f"{DELETE_FILE} is not UTF-8 text: {e}"]) from None
    names, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        name = name if name.startswith("producer/") else f"producer/{name}"
        if problem := name_problem(name):
            problems.append(f"{DELETE_FILE} line {number}: {problem}")
        elif name not in names:
            names.append(name)
    if problems:
        more = len(problems) - _MAX_PROBLEMS
        raise ManifestError(problems[:_MAX_PROBLEMS] + ([f"and {more} more"] if more > 0 else []))
    return names


def as_store_value(names: list[str]) -> str:
    return "".join(f"{name}\n" for name in names)


def from_store_value(value: object) -> list[str]:
    """The names of a ``store`` node's ``delete``; checked, since another writer may have
    written it (a name that is unsafe is refused, not skipped)."""
    if not value:
        return []
    if not isinstance(value, str):
        raise ManifestError([f"the store node's delete list is not text: {value!r}"])
    return parse_delete_file(value.encode("utf-8"))


def store_mode(action: str, node: str, ark: str) -> str:
    if action not in ACTIONS:
        raise ValueError(f"submission mode {action!r} is not one of {', '.join(ACTIONS)}")
    return f"{action}/{node}/{quote(ark, safe='')}"


def store_action(mode: object, default: str = "add") -> str:
    """``add`` or ``update`` from a ``store`` node's mode (``update/...``, or the bare word an
    earlier version of this queue wrote)."""
    if isinstance(mode, str):
        action = mode.split("/", 1)[0].strip().lower()
        if action in ACTIONS:
            return action
    return default
