"""The ARK each mint in flight was given, kept on disk under its token (a job's id).

A minting step can be cut off after the identifier service answered and before the step saved
the ARK where a re-run finds it (a worker killed, or cut off from ZooKeeper while another
takes the job). Without a record the re-run mints a second identifier and the first is an
orphan at the service. So the minter keeps the ARK under the token before it hands it back,
and the caller ``forget``s it once saved: the tokens kept are those of mints in flight.

Guarantees: ``keep`` makes the token's ARK durable (file fsynced, then its directory) before
it returns; the first ARK kept for a token wins, and a later one (two attempts of one job
minting at once) is logged as minted and not used, never handed out. A token is a plain name
(``MinterError`` otherwise), so it never names a path outside ``state_dir``. Tokens live in
``<state_dir>/<naan>-<prefix>.tokens/``, one file each, as the local minter has kept them.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path

from .durable import fsync_dir, make_dirs
from .errors import MinterError

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_ARK = re.compile(r"ark:/[0-9A-Za-z]+/[0-9A-Za-z_./-]+")
# A shoulder the minter has parsed: ``ark:/<naan>/<prefix>``.
_SHOULDER = re.compile(r"ark:/(?P<naan>[0-9a-z]+)/(?P<prefix>[0-9a-z]+)")


class MintTokens:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)

    def path(self, shoulder: str, token: str) -> Path:
        if not _TOKEN.fullmatch(token):
            raise MinterError(f"a minting token must be a plain name, not {token!r}")
        if not (parts := _SHOULDER.fullmatch(shoulder)):
            raise MinterError(f"not a shoulder: {shoulder!r}")
        return self.state_dir / f"{parts['naan']}-{parts['prefix']}.tokens" / token

    def recall(self, shoulder: str, token: str) -> str | None:
        """The ARK kept for ``token`` on ``shoulder``; None when there is none, or what a
        crash left of one."""
        try:
            ark = self.path(shoulder, token).read_text(encoding="ascii", errors="replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _unreadable(exc) from exc
        ark = ark.strip()
        return ark if ark.startswith(shoulder) and _ARK.fullmatch(ark) else None

    def keep(self, shoulder: str, token: str, ark: str) -> str:
        """Keep ``ark`` for ``token`` unless one is kept already; the ARK kept."""
        path = self.path(shoulder, token)
        # Of this process and thread: two threads keeping one token write apart.
        tmp = path.with_name(f".{path.name}.{os.getpid()}{threading.get_native_id()}.tmp")
        try:
            make_dirs(path.parent)
            with open(tmp, "w", encoding="ascii") as f:
                f.write(f"{ark}\n")
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # fails where an ARK is kept already: the first stays
            except FileExistsError:
                if (kept := self.recall(shoulder, token)) and kept != ark:
                    log.warning(
                        "%s was minted for %s but not used: %s was minted for it first; "
                        "delete %s at the identifier service if it should not stay",
                        ark,
                        token,
                        kept,
                        ark,
                    )
                    return kept
                os.replace(tmp, path)  # what a crash left of one: this ARK replaces it
            fsync_dir(path.parent)
            return ark
        except OSError as exc:
            raise _unreadable(exc) from exc
        finally:
            tmp.unlink(missing_ok=True)

    def forget(self, shoulder: str, token: str) -> None:
        """Drop ``token``'s ARK; not durable, as one left behind only takes a little room."""
        self.path(shoulder, token).unlink(missing_ok=True)


def _unreadable(exc: OSError) -> MinterError:
    return MinterError(f"cannot keep the minted ARK: {exc.strerror or exc}", retryable=True)
