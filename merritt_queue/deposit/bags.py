"""A deposited container that is a BagIt bag (RFC 8493): found, checked, split.

The container is unpacked (``containers.unpack``: no link, no ``..``, bounded) before any of
this runs, so every path here is a plain file or folder inside the unpacked tree. The
library is LoC's ``bagit``; what is ours:

- a bag with a ``fetch.txt`` is refused before the library reads it: its content is
  elsewhere, and nothing is ever downloaded because a depositor's bag names it (the
  library itself never fetches, but a bag it calls incomplete would only mislead);
- tag files are bounded in size before the library reads them whole into memory;
- the problems are kept as data (``BagProblem``), so the caller can say them in a short
  message and in full in the step's record; the library's own texts name absolute paths.

Pure: no Django, no network.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import bagit

BAGIT_TXT = "bagit.txt"
PAYLOAD = "data"
FETCH_TXT = "fetch.txt"
# A manifest of a container's largest allowed listing is a few MiB; more is not a bag's.
MAX_TAG_FILE_BYTES = 16 * 1024 * 1024
# bag-info.txt values are the depositor's text: cut, control characters removed.
MAX_INFO_CHARS = 1000
_HEX = re.compile(r"[0-9a-fA-F]+")


@dataclass(frozen=True)
class BagProblem:
    """One thing wrong with a bag: ``kind`` is ``mismatch``, ``missing``, ``extra`` or
    ``bag`` (its structure, its tag files, its Payload-Oxum)."""

    kind: str
    path: str = ""
    algorithm: str = ""
    expected: str = ""
    got: str = ""
    text: str = ""

    def __str__(self) -> str:
        return self.said(full=True)

    def said(self, full: bool = False) -> str:
        """The problem in words; not ``full``, digests past an md5's length are cut (the
        step's record keeps them whole) so that a message names more files."""
        # Names and digests are the depositor's text: one line each in the job's message.
        path, said = clean_text(self.path, MAX_INFO_CHARS), clean_text(self.expected, 200)
        if self.kind == "mismatch":
            expected, got = (said, self.got) if full else map(_cut, (said, self.got))
            return f"{path}: {self.algorithm} expected {expected}, got {got}"
        if self.kind == "missing":
            return f"{path}: listed in the manifest, missing from the bag"
        if self.kind == "extra":
            return f"{path}: in the bag, not in its manifest"
        return self.text


@dataclass
class BagCheck:
    """What checking a bag found: its problems (none for a valid bag), and its bag-info."""

    problems: list[BagProblem] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)
    algorithms: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems


def _cut(digest: str) -> str:
    return digest if len(digest) <= 32 else digest[:32] + "…"


def find_bag(root: Path) -> Path | None:
    """The bag's folder: ``root`` itself when it holds ``bagit.txt``, else the one folder
    that is all ``root`` holds, when that one holds it; None when the tree is no bag."""
    if (root / BAGIT_TXT).is_file():
        return root
    children = list(root.iterdir())
    if len(children) == 1 and children[0].is_dir() and (children[0] / BAGIT_TXT).is_file():
        return children[0]
    return None


def check_bag(bag_dir: Path) -> BagCheck:
    """Every manifest's entries present, no payload file missing from the manifests,
    Payload-Oxum, and every digest of every manifest's algorithm."""
    if problem := _fetch_problem(bag_dir) or _oversized_tag_file(bag_dir):
        return BagCheck([problem])
    try:
        bag = bagit.Bag(str(bag_dir))
    except (bagit.BagError, UnicodeError, ValueError, OSError) as e:
        return BagCheck([BagProblem("bag", text=_scrubbed(e, bag_dir))])
    check = BagCheck(info=_info(bag.info), algorithms=sorted(bag.algorithms))
    if not (bag_dir / PAYLOAD).is_dir():
        check.problems.append(BagProblem("bag", text="the bag has no data/ folder"))
        return check
    # The library checks Payload-Oxum first and stops there; the files that do not match
    # are what the depositor needs named, so they are checked first, the Oxum after.
    oxum = bag.info.pop("Payload-Oxum", None)
    check.problems += _validated(bag, bag_dir, fast=False)
    if oxum is not None:
        bag.info["Payload-Oxum"] = oxum
        check.problems += [
            p for p in _validated(bag, bag_dir, fast=True) if p not in check.problems
        ]
    if check.valid and not any(p.is_file() for p in (bag_dir / PAYLOAD).rglob("*")):
        check.problems.append(BagProblem("bag", text="the bag's data/ folder holds no file"))
    return check


def _validated(bag: bagit.Bag, bag_dir: Path, fast: bool) -> list[BagProblem]:
    """The problems ``Bag.validate`` finds: ``fast``, the Payload-Oxum only; else the
    manifests' completeness, then (once complete) every digest of every algorithm."""
    try:
        bag.validate(processes=1, fast=fast)
    except bagit.BagValidationError as e:
        if e.details:
            return [_problem(d, bag_dir) for d in e.details]
        return [BagProblem("bag", text=_scrubbed(e.message, bag_dir))]
    except (bagit.BagError, UnicodeError, ValueError, OSError) as e:
        return [BagProblem("bag", text=_scrubbed(e, bag_dir))]
    return []


def _fetch_problem(bag_dir: Path) -> BagProblem | None:
    """Any fetch.txt, even an empty one: the library cannot read a blank line of it."""
    fetch = bag_dir / FETCH_TXT
    if not fetch.is_file():
        return None
    with open(fetch, "rb") as f:
        listed = sum(1 for line in f if line.strip())
    return BagProblem(
        "bag",
        text=(
            f"it has a {FETCH_TXT} ({listed} file(s) listed to fetch from elsewhere); a bag is "
            "accepted only with every file inside it and no fetch.txt (nothing is fetched)"
        ),
    )


def _oversized_tag_file(bag_dir: Path) -> BagProblem | None:
    for path in bag_dir.iterdir():
        if path.is_file() and path.stat().st_size > MAX_TAG_FILE_BYTES:
            return BagProblem(
                "bag",
                text=f"its tag file {path.name} is over {MAX_TAG_FILE_BYTES} bytes (the limit)",
            )
    return None


def _problem(detail: Exception, bag_dir: Path) -> BagProblem:
    path = str(getattr(detail, "path", ""))
    if isinstance(detail, bagit.ChecksumMismatch):
        got = str(detail.found or "")
        return BagProblem(
            "mismatch",
            path,
            str(detail.algorithm),
            str(detail.expected),
            got if _HEX.fullmatch(got) else "an unreadable file",
        )
    if isinstance(detail, bagit.FileMissing):
        return BagProblem("missing", path)
    if isinstance(detail, bagit.UnexpectedFile):
        return BagProblem("extra", path)
    return BagProblem("bag", text=_scrubbed(detail, bag_dir))


def _scrubbed(error: object, bag_dir: Path) -> str:
    """The library's text without the working folder's path, which is not the depositor's."""
    text = str(error)
    for prefix in (str(bag_dir) + os.sep, str(bag_dir)):
        text = text.replace(prefix, "")
    return clean_text(text, MAX_INFO_CHARS)


def _info(raw: dict) -> dict[str, str]:
    """bag-info.txt as single values (the first of a repeated tag), cleaned."""
    info = {}
    for name, value in list(raw.items())[:200]:
        first = value[0] if isinstance(value, list) and value else value
        if isinstance(first, str) and isinstance(name, str):
            info[clean_text(name, 100)] = clean_text(first, MAX_INFO_CHARS)
    return info


def clean_text(value: str, limit: int) -> str:
    """``value`` on one line: control and format characters become spaces, runs of white
    space one space, and it is cut to ``limit`` characters."""
    kept = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in value)
    return " ".join(kept.split())[:limit]


def split_bag(bag_dir: Path, payload: Path, tags: Path) -> None:
    """Move the bag's payload (``data/``'s contents) to ``payload`` and every other file of
    it (bagit.txt, bag-info.txt, the manifests, tag folders) under ``tags``; both are new."""
    os.rename(bag_dir / PAYLOAD, payload)
    tags.mkdir(parents=True)
    for child in sorted(bag_dir.iterdir()):
        os.rename(child, tags / child.name)
