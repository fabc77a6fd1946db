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
- ``EzidMinter`` sends one POST per call and never retries on its own: a POST whose answer was
  lost may have minted already, so repeating it is the caller's decision (``retryable``).
  EZID keeps no tokens: there, a re-run after such a loss mints a second ARK.
"""

from __future__ import annotations

import fcntl
import os
import re
from contextlib import closing
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

import requests

from . import httputil, transport
from .durable import fsync_dir, make_dirs
from .errors import FetchError, MinterError

# NOID's "extended digits"; their positions are the ordinals NCDA uses.
NOID_DIGITS = "0123456789bcdfghjkmnpqrstvwxz"
# The blade's digits start with letters so a blade never reads as a number.
BLADE_DIGITS = "bcdfghjkmnpqrstvwxz0123456789"
BLADE_MIN_LENGTH = 6

_ORDINAL = {c: i for i, c in enumerate(NOID_DIGITS)}
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_SHOULDER = re.compile(r"ark:/(?P<naan>[0-9bcdfghjkmnpqrstvwxz]{5,})/(?P<prefix>[0-9a-z]+)")


class Minter(Protocol):
    def mint(
        self,
        shoulder: str,
        *,
        who: str = "",
        what: str = "",
        when: str = "",
        where: str = "",
        target: str = "",
        token: str = "",
    ) -> str: ...

    def forget(self, shoulder: str, token: str) -> None: ...


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

    def mint(
        self,
        shoulder: str,
        *,
        who: str = "",
        what: str = "",
        when: str = "",
        where: str = "",
        target: str = "",
        token: str = "",
    ) -> str:
        naan, prefix = parse_shoulder(shoulder)
        name = f"{naan}-{prefix}"
        counter = self.state_dir / f"{name}.counter"
        remembered = self._token_file(shoulder, token) if token else None
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
        """Drop ``token``'s ARK; not durable, as one left behind only takes a little room."""
        self._token_file(shoulder, token).unlink(missing_ok=True)

    def _token_file(self, shoulder: str, token: str) -> Path:
        naan, prefix = parse_shoulder(shoulder)
        if not _TOKEN.fullmatch(token):
            raise MinterError(f"a minting token must be a plain name, not {token!r}")
        return self.state_dir / f"{naan}-{prefix}.tokens" / token


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


# -- EZID ---------------------------------------------------------------------------------


def anvl_escape(text: str, *, name: bool = False) -> str:
    """EZID's ANVL escaping: ``%`` and line ends always, ``:`` in element names too."""
    pattern = "[%:\r\n]" if name else "[%\r\n]"
    return re.sub(pattern, lambda m: f"%{ord(m.group(0)):02X}", text)


def anvl_unescape(text: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def anvl(metadata: dict[str, str]) -> str:
    return "\n".join(
        f"{anvl_escape(k, name=True)}: {anvl_escape(v)}" for k, v in metadata.items() if v
    )


class EzidMinter:
    """Mints through EZID's API: ``POST {base_url}/shoulder/{shoulder}``."""

    def __init__(
        self,
        base_url: str,
        username: str,
        password: str,
        timeout: float = 30,
        session_factory=requests.Session,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.timeout = timeout
        self.session_factory = session_factory

    def mint(
        self,
        shoulder: str,
        *,
        who: str = "",
        what: str = "",
        when: str = "",
        where: str = "",
        target: str = "",
        token: str = "",  # EZID keeps none (see the module's guarantees)
    ) -> str:
        parse_shoulder(shoulder)
        body = anvl(
            {
                "_target": target,
                "erc.who": who,
                "erc.what": what,
                "erc.when": when,
                "erc.where": where,
            }
        )
        url = f"{self.base_url}/shoulder/{quote(shoulder, safe=':/')}"
        resp = self._post(url, body)
        return self._parse(shoulder, resp)

    def forget(self, shoulder: str, token: str) -> None:
        """Nothing to drop: EZID keeps no tokens."""

    def _post(self, url: str, body: str) -> requests.Response:
        try:
            with closing(transport.pinned_session(self.session_factory())) as session:
                return transport.operator_request(
                    session,
                    "POST",
                    url,
                    data=body.encode("utf-8"),
                    headers={"Content-Type": "text/plain; charset=UTF-8", "Accept": "text/plain"},
                    auth=(self.username, self.password),
                    timeout=self.timeout,
                    allow_redirects=False,
                )
        except FetchError as exc:
            raise MinterError(
                f"EZID at {self.base_url}: {exc.message}", retryable=exc.retryable
            ) from exc
        except requests.RequestException as exc:
            raise MinterError(
                f"EZID at {self.base_url} could not be reached: {httputil.describe(exc)}",
                retryable=httputil.is_transient(exc),
            ) from exc

    def _parse(self, shoulder: str, resp: requests.Response) -> str:
        text = resp.content.decode("utf-8", "replace").strip()
        first = text.splitlines()[0] if text else ""
        status = httputil.status_text(resp)
        if resp.status_code == 201 and first.startswith("success:"):
            ark = anvl_unescape(first.removeprefix("success:").split("|")[0].strip())
            if not ark.startswith(shoulder):
                raise MinterError(f"EZID minted {ark!r}, which is not on shoulder {shoulder}")
            return ark
        said = anvl_unescape(first.removeprefix("error:").strip()) or "(no message)"
        if resp.status_code == 401:
            raise MinterError(
                f"EZID refused the credentials of user {self.username!r} ({status}): {said}"
            )
        raise MinterError(
            f"EZID could not mint on {shoulder} ({status}): {said}",
            retryable=httputil.is_retryable_status(resp.status_code),
        )
