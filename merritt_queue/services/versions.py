"""What a new version of an object holds, decided from the current one: Merritt's add and update.

An *add* is a complete version: exactly the files submitted. An *update* is a delta: the
current version's files carried forward, the submitted files added or replacing the same
names, the delete list's names removed. Either way each name is then labelled against the
current version (added, replaced, carried, deleted), and a version that would hold exactly
the current files is no version at all (``VersionPlan.unchanged``).

Both storage adapters plan here, so local storage and Merritt's storage service agree on what
an update means; this module reads no disk and speaks to no service.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import StorageError

CHANGES = ("added", "replaced", "carried", "deleted")
MODES = ("add", "update")


@dataclass(frozen=True)
class StoredFile:
    name: str
    size: int
    digests: dict[str, str]

    def same_content(self, other: StoredFile) -> bool:
        """Same size and every digest both know agrees (at least one must be shared)."""
        shared = self.digests.keys() & other.digests.keys()
        return (
            self.size == other.size
            and bool(shared)
            and all(self.digests[a].lower() == other.digests[a].lower() for a in shared)
        )


@dataclass(frozen=True)
class FileChange:
    """What became of one name from the previous version to this one (``CHANGES``)."""

    name: str
    change: str


@dataclass(frozen=True)
class StoredVersion:
    """A version: every file it holds (carried ones too), and what changed since the last.

    ``unchanged``: nothing was written, because the version asked for would hold exactly the
    files of the current one (``version``); a content duplicate is not a new version."""

    ark: str
    version: int
    files: list[StoredFile]
    token: str
    changes: tuple[FileChange, ...] = ()
    unchanged: bool = False

    def counts(self) -> dict[str, int]:
        return {c: sum(1 for f in self.changes if f.change == c) for c in CHANGES}


@dataclass(frozen=True)
class VersionPlan:
    """``files``: the new version's files in order; ``carried``: those whose bytes the
    previous version already holds (never copied again); ``ignored_deletes``: names the
    delete list gave that the current version does not hold."""

    files: list[StoredFile]
    changes: tuple[FileChange, ...]
    carried: dict[str, StoredFile]
    ignored_deletes: tuple[str, ...] = ()

    @property
    def unchanged(self) -> bool:
        return bool(self.changes) and all(c.change == "carried" for c in self.changes)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise StorageError(f"storage mode {mode!r} is not one of {', '.join(MODES)}")
    return mode


def plan_version(
    previous: list[StoredFile] | None,
    submitted: list[StoredFile],
    mode: str,
    delete: tuple[str, ...] | list[str] = (),
) -> VersionPlan:
    """The version ``mode`` makes of ``submitted`` on top of ``previous`` (None: no object yet).

    A name both submitted and deleted is a contradiction the depositor must resolve, not a
    guess to make: refused."""
    check_mode(mode)
    before = {f.name: f for f in previous or []}
    submitted_names = {f.name for f in submitted}
    if clash := sorted(submitted_names & set(delete)):
        raise StorageError(
            f"the update both submits and deletes {', '.join(clash[:5])}: "
            "remove the name from mrt-delete.txt or stop submitting the file"
        )
    kept: list[StoredFile] = []
    if mode == "update":
        kept = [f for f in before.values() if f.name not in submitted_names | set(delete)]
    files = sorted(kept + list(submitted), key=lambda f: f.name)
    changes, carried = [], {}
    for f in files:
        old = before.get(f.name)
        if old is None:
            changes.append(FileChange(f.name, "added"))
        elif old is f or old.same_content(f):
            changes.append(FileChange(f.name, "carried"))
            carried[f.name] = old
        else:
            changes.append(FileChange(f.name, "replaced"))
    names = {f.name for f in files}
    changes += [FileChange(n, "deleted") for n in sorted(before) if n not in names]
    ignored = tuple(n for n in delete if n not in before) if mode == "update" else ()
    return VersionPlan(files, tuple(changes), carried, ignored)


def diff(previous: list[StoredFile] | None, current: list[StoredFile]) -> tuple[FileChange, ...]:
    """The changes from one stored version to the next, when only both file lists are known."""
    return plan_version(previous, current, "add").changes
