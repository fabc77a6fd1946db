"""One attempt at a job's step, and the fence its side effects outside ZooKeeper pass.

A step can run twice at once: a worker cut off from ZooKeeper keeps running while its
session expires, and another worker takes the job. Each run is an *attempt*, named by the
job's status version read under the lock, the ZooKeeper session that took the lock, and a
nonce (``token``), so no two attempts of a job share a name, even in one session.

Guarantees:

- ``check`` returns only while the attempt may still be the job's current one, as far as
  this process can tell: the session that took the lock is the client's session and was
  never lost since, and the connection is up. While the connection is suspended it waits
  for it to come back in the same session, at most ``give_up`` seconds from the moment it
  was cut; it raises ``AttemptStale`` (a ``LockLost``: the runner abandons the step without
  committing, and it runs again) once the session is lost or replaced, or the wait runs out.
  What it cannot see is a cut that happens after it returned: so it is asked right before
  each side effect, and side effects are small (a chunk, a rename), never a whole step.
- ``staging(root)`` is a folder only this attempt writes in: a stale attempt's files never
  land where a newer attempt's are, and an attempt removes only its own.
- ``sweep_abandoned`` removes only staging folders nothing has written in for a day: an
  attempt that is alive writes (a download's reads time out long before), so such a
  folder is a crashed attempt's, which could not clean up after itself.
- A handler run outside the runner (a test, a benchmark) gets an unfenced attempt
  (``unfenced``): its own staging folder, and a ``check`` that always passes.
"""

from __future__ import annotations

import contextvars
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient, KazooState

from .errors import LockLost
from .steplog import StepLog, recording

# Where attempts stage their files, under the folder they publish into.
STAGING = ".attempts"
# A staging folder untouched this long belongs to an attempt that died (see the module).
ABANDONED_AFTER = 86400.0


class AttemptStale(LockLost):
    """This attempt may no longer be the job's current one: it must start nothing more."""


class ConnectionWatch:
    """A client's connection as the steps of its worker need it: up or since when down,
    and how many sessions it has lost (kazoo's state listener)."""

    def __init__(self, client: KazooClient, give_up: float) -> None:
        self.client = client
        self.give_up = give_up
        self.losses = 0
        self._changed = threading.Condition()
        self.cut_since: float | None = None
        if client.state != KazooState.CONNECTED:
            self.cut_since = time.monotonic()
        client.add_listener(self._on_state)

    def _on_state(self, state: str) -> bool:
        # Runs on kazoo's connection thread: note the change and wake the waiters, no more.
        with self._changed:
            if state == KazooState.CONNECTED:
                self.cut_since = None
            else:
                self.cut_since = self.cut_since or time.monotonic()
                if state == KazooState.LOST:
                    self.losses += 1
            self._changed.notify_all()
        return False

    def session(self) -> int | None:
        cid = self.client.client_id
        return cid[0] if cid else None

    def ensure_current(self, attempt: Attempt, before: str) -> None:
        """Return while ``attempt`` may go on to ``before``; see the module's guarantees."""
        # Asked before every chunk of a download: the usual answer needs no lock. A change
        # racing this read is seen by the next check, as one landing just after it would be.
        if (
            self.cut_since is None
            and self.losses == attempt.losses
            and self.session() == attempt.session
        ):
            return
        asked = time.monotonic()
        with self._changed:
            while True:
                # kazoo names no session while it reconnects (``client_id`` is None until
                # the session is live again): that is a cut to wait out, not a new session.
                session = self.session()
                if self.losses != attempt.losses or session not in (None, attempt.session):
                    raise AttemptStale(
                        f"{attempt.describe()}: did not {before}: the ZooKeeper session that "
                        "took the job's lock has ended, so another worker may be running this "
                        "step; this attempt stops and leaves that one's files alone"
                    )
                if self.cut_since is None and session is not None:
                    return
                since = self.cut_since if self.cut_since is not None else asked
                left = since + self.give_up - time.monotonic()
                if left <= 0:
                    raise AttemptStale(
                        f"{attempt.describe()}: did not {before}: cut off from ZooKeeper for "
                        f"more than {self.give_up:g} s (MQ_STEP_CUT_OFF_SECONDS); the step is "
                        "abandoned and runs again"
                    )
                # Not woken when the session goes live after the state change: look again soon.
                self._changed.wait(min(left, 0.05) if self.cut_since is None else left)


@dataclass(frozen=True)
class Attempt:
    """One run of one step of a job; ``token`` names it."""

    jid: str
    status: str
    status_version: int
    session: int | None
    nonce: str
    watch: ConnectionWatch | None = None
    losses: int = 0
    # What the attempt did, as its adapters tell it (``steplog``); the runner keeps it in
    # the job's ``steps`` node with the step's outcome.
    log: StepLog = field(default_factory=StepLog, compare=False, repr=False)

    @classmethod
    def begin(
        cls, watch: ConnectionWatch, jid: str, status: str, version: int, session: int | None
    ) -> Attempt:
        """The attempt a worker starts on a job it has just locked in ``session``."""
        return cls(jid, status, version, session, _nonce(), watch, watch.losses)

    @classmethod
    def unfenced(cls, jid: str, status: str = "") -> Attempt:
        return cls(jid, status, -1, None, _nonce())

    @property
    def token(self) -> str:
        """A file name that no other attempt of any job's step uses."""
        session = f"{self.session:x}" if self.session is not None else "none"
        return f"{self.jid}-v{self.status_version}-s{session}-{self.nonce}"

    def describe(self) -> str:
        return f"job {self.jid} {self.status} (attempt {self.token})"

    def check(self, before: str) -> None:
        """Raise ``AttemptStale`` unless this attempt may still ``before`` (a few words)."""
        if self.watch is not None:
            self.watch.ensure_current(self, before)

    def staging(self, root: Path) -> Path:
        """This attempt's own folder under ``root`` (not made here)."""
        return root / STAGING / self.token


def sweep_abandoned(root: Path, older_than: float = ABANDONED_AFTER) -> list[Path]:
    """Remove the staging folders under ``root`` nothing has written in for ``older_than``
    seconds; the folders removed."""
    cutoff = time.time() - older_than
    removed = []
    for folder in sorted((root / STAGING).glob("*")):
        if _last_written(folder) < cutoff:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _last_written(folder: Path) -> float:
    newest = 0.0
    for path in (folder, *folder.rglob("*")):
        try:
            newest = max(newest, path.lstat().st_mtime)
        except FileNotFoundError:  # its attempt is removing it: not abandoned
            return time.time()
    return newest


def _nonce() -> str:
    return uuid.uuid4().hex[:8]


_current: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar(
    "merritt_queue_attempt", default=None
)


def current() -> Attempt | None:
    """The attempt the runner is running in this thread, None outside one."""
    return _current.get()


@contextmanager
def running(attempt: Attempt) -> Iterator[Attempt]:
    """Make ``attempt`` the current one while a handler runs, and its log the one
    ``steplog.note`` appends to."""
    reset = _current.set(attempt)
    try:
        with recording(attempt.log):
            yield attempt
    finally:
        _current.reset(reset)
