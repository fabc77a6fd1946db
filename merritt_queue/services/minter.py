"""Minting ARK identifiers.

Guarantees:

- ``LocalMinter`` never returns the same identifier twice, across threads and processes on one
  host: the per-shoulder counter is read and advanced under an exclusive ``flock``, and the new
  value is on disk (written to a temporary file, fsynced, renamed) before the identifier is
  returned. A crash can skip an identifier, never repeat one. Identifiers are NOID-style:
  ``ark:/NAAN/<shoulder><blade><check>``, the check character being NOID's NCDA over
  ``NAAN/<shoulder><blade>``.
- With a ``token`` (the job's id), ``LocalMinter`` mints once per token and shoulder: a
  step re-run after its ARK was minted but not saved (a worker killed, ZooKeeper away) gets
  the same ARK back. The token's ARK is written after the counter is durable, under the same
  lock, and is not fsynced itself: a machine crash may lose it or leave it cut short (read
  back as no token), which wastes an identifier the caller never saved, and never hands one
  out twice. Once the caller has saved the ARK where a re-run finds it, ``forget`` drops the
  token, so the tokens kept are those of mints in flight, not one file per job ever minted.
- ``EzidMinter`` (``ezid.py``) mints and describes through EZID as Merritt's ingest does;
  given ``MintTokens`` (``minttokens.py``) it too mints once per token, keeping the ARK
  durably before it returns, since EZID itself keeps no tokens.
"""

from __future__ import annotations

import fcntl
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .durable import fsync_dir, make_dirs
from .errors import MinterError
from .minttokens import MintTokens

# NOID's "extended digits"; their positions are the ordinals NCDA uses.
NOID_DIGITS = "0123456789bcdfghjkmnpqrstvwxz"
# The blade's digits start with letters so a blade never reads as a number.
BLADE_DIGITS = "bcdfghjkmnpqrstvwxz0123456789"
BLADE_MIN_LENGTH = 6

_ORDINAL = {c: i for i, c in enumerate(NOID_DIGITS)}
_SHOULDER = re.compile(r"ark:/(?P<naan>[0-9bcdfghjkmnpqrstvwxz]{5,})/(?P<prefix>[0-9a-z]+)")


ADMIN_AGGREGATES = ("MRT-collection", "MRT-owner", "MRT-service-level-agreement")


@dataclass(frozen=True)
class Citation:
    """What the identifier service is told about an object, as Merritt's ingest tells EZID.

    ``where`` excludes the object's ARK, which the minter adds once it is known. ``owner`` is
    the EZID user made the identifier's owner (the profile's EZID co-owner), ``creator`` the
    ``mrt.creator`` element (the profile's context), ``admin`` an administrative object
    (collection, owner, service-level agreement), whose identifier stays reserved."""

    who: str = ""
    what: str = ""
    when: str = ""
    where: tuple[str, ...] = ()
    owner: str = ""
    creator: str = ""
    admin: bool = False


NO_CITATION = Citation()


class Minter(Protocol):
    def mint(self, shoulder: str, *, citation: Citation = NO_CITATION, token: str = "") -> str: ...

    def forget(self, shoulder: str, token: str) -> None: ...

    def describe(self, ark: str, citation: Citation) -> bool: ...


def parse_shoulder(shoulder: str) -> tuple[str, str]:
    """``ark:/99999/fk4`` -> (``99999``, ``fk4``); MinterError when malformed."""
    match = _SHOULDER.fullmatch(shoulder)
    if not match:
        raise MinterError(
            f"shoulder {shoulder!r} is not of the form ark:/NAAN/prefix "
            "(NAAN of 5 or more digits, prefix of lower-case letters and digits)"
        )
    return match["naan"], match["prefix"]


def ncda(text: str) -> str:
    """NOID Check Digit Algorithm: the check character for ``text`` (e.g. ``13030/xf93gt2``)."""
    total = sum((i + 1) * _ORDINAL.get(c, 0) for i, c in enumerate(text))
    return NOID_DIGITS[total % len(NOID_DIGITS)]


def ncda_valid(ark: str) -> bool:
    """True when the last character of ``ark`` is the NCDA check of the rest."""
    body = ark.removeprefix("ark:/")
    return len(body) > 1 and ncda(body[:-1]) == body[-1]


def blade(n: int) -> str:
    """The counter ``n`` in base 29, at least ``BLADE_MIN_LENGTH`` characters."""
    digits = []
    while True:
        n, d = divmod(n, len(BLADE_DIGITS))
        digits.append(BLADE_DIGITS[d])
        if n == 0:
            break
    return "".join(reversed(digits)).rjust(BLADE_MIN_LENGTH, BLADE_DIGITS[0])


class LocalMinter:
    """Noid-style minter keeping one counter file per shoulder under ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.tokens = MintTokens(self.state_dir)

    def mint(self, shoulder: str, *, citation: Citation = NO_CITATION, token: str = "") -> str:
        naan, prefix = parse_shoulder(shoulder)
        name = f"{naan}-{prefix}"
        counter = self.state_dir / f"{name}.counter"
        remembered = self.tokens.path(shoulder, token) if token else None
        try:
            # A counter in a directory a crash forgot would start again from 0.
            make_dirs(self.state_dir)
            if remembered:
                remembered.parent.mkdir(exist_ok=True)
            # A separate lock file: the counter file itself is replaced on every write,
            # and a lock on a replaced inode would no longer exclude anybody.
            with open(self.state_dir / f"{name}.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if remembered and (ark := _remembered_ark(remembered, shoulder)):
                    return ark
                value = _read_counter(counter)
                _write_durably(counter, f"{value + 1}\n")
                body = f"{naan}/{prefix}{blade(value)}"
                ark = f"ark:/{body}{ncda(body)}"
                if remembered:
                    # Only a whole, valid ARK is read back, so a plain write will do.
                    remembered.write_text(f"{ark}\n", encoding="ascii")
                return ark
        except OSError as exc:
            raise MinterError(
                f"cannot update the minter counter {counter}: {exc.strerror or exc}",
                retryable=True,
            ) from exc

    def forget(self, shoulder: str, token: str) -> None:
        self.tokens.forget(shoulder, token)

    def describe(self, ark: str, citation: Citation) -> bool:
        """Nothing to tell: a local minter keeps no metadata."""
        return False


def _read_counter(path: Path) -> int:
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return 0
    if not text.isdigit():
        # Starting again from 0 would re-mint identifiers already handed out.
        raise MinterError(f"minter counter {path} is corrupt ({text[:40]!r}); fix it by hand")
    return int(text)


def _remembered_ark(path: Path, shoulder: str) -> str | None:
    """The ARK a token file names; None when there is none, or what a crash left of one."""
    try:
        ark = path.read_text(encoding="ascii", errors="replace").strip()
    except FileNotFoundError:
        return None
    return ark if ark.startswith(shoulder) and ncda_valid(ark) else None


def _write_durably(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
