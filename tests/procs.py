"""Real processes of one test: the queue's ``manage.py`` commands, servers, and waiting on them.

Each process runs from the repository with the test's environment (plus any per-process
overrides), its output in ``<root>/<name>.log``; ``logs()`` gives the end of every log for a
failure message. Nothing here knows which database, ZooKeeper or Redis the processes use:
that is all in ``env`` (``queue_env`` builds the usual one).

Used by ``tests.cluster`` (kill and fault tests), ``test_multiprocess_pg`` and
``test_redis_sentinel``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from merritt_queue.core.dispatcher import all_queue_names

REPO = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (a server started later may still lose it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TEST_SECRET_KEY = "tests-only-" + "k" * 50


def queue_env(
    root: Path,
    *,
    database_url: str,
    zk_hosts: str,
    chroot: str,
    redis_url: str | None,
    **more: str,
) -> dict[str, str]:
    """The environment of the queue's processes, their directories under ``root``.

    ``redis_url=None``: no ``REDIS_URL`` at all, for processes that find Redis through the
    Sentinel variables in ``more``. With a URL, Sentinel variables inherited from the
    caller are dropped, since they would win over it.
    """
    env = os.environ | {
        # DEBUG is off by default, and then the development key is refused (mq.E030).
        "SECRET_KEY": TEST_SECRET_KEY,
        "ZK_HOSTS": zk_hosts,
        "ZK_CHROOT": chroot,
        "DATABASE_URL": database_url,
        "MQ_WORK_DIR": str(root / "work"),
        "MQ_STORAGE_ROOT": str(root / "storage"),
        "MQ_MINTER_DIR": str(root / "minter"),
        "MQ_ALLOW_LOOPBACK": "true",
        "MQ_SWEEP_SECONDS": "1",
        "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
        "PYTHONUNBUFFERED": "1",
    }
    if redis_url is None:
        env.pop("REDIS_URL", None)
    else:
        env["REDIS_URL"] = redis_url
        for name in ("REDIS_SENTINELS", "REDIS_SENTINEL_MASTER", "REDIS_SENTINEL_DB"):
            env.pop(name, None)
    return env | more


@dataclass
class Procs:
    env: dict[str, str]
    root: Path
    procs: list[tuple[str, subprocess.Popen]] = field(default_factory=list)

    def manage(self, *args: str, timeout: float = 120) -> str:
        """Run a manage.py command to its end; its stdout."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode:
            raise AssertionError(f"manage.py {args[0]} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def spawn(
        self, name: str, argv: list[str], *, cwd: Path = REPO, **env: str
    ) -> subprocess.Popen:
        """Start ``argv`` in the background, ``env`` over the test's environment.

        The log is opened for appending: a process started again under the same name (a
        worker after a kill) adds to the story instead of wiping it.
        """
        log = open(self.root / f"{name}.log", "ab")  # the child keeps its own copy
        proc = subprocess.Popen(
            argv, cwd=cwd, env=self.env | env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.procs.append((name, proc))
        return proc

    def start(self, name: str, *argv: str, **env: str) -> subprocess.Popen:
        """Start ``python *argv`` in the background (``-m gunicorn ...``, ``manage.py ...``)."""
        return self.spawn(name, [sys.executable, *argv], **env)

    def worker(self, name: str, *queues: str, **env: str) -> subprocess.Popen:
        """An RQ worker on ``queues`` (default: every queue, in serving order)."""
        return self.start(name, "manage.py", "rqworker", *(queues or all_queue_names()), **env)

    def dispatcher(self, **env: str) -> subprocess.Popen:
        return self.start("dispatcher", "manage.py", "run_dispatcher", **env)

    def proc(self, name: str) -> subprocess.Popen:
        """The latest process started under ``name``."""
        return [p for n, p in self.procs if n == name][-1]

    def exited(self) -> list[str]:
        return [f"{name} (exit {p.returncode})" for name, p in self.procs if p.poll() is not None]

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self, lines: int = 25) -> str:
        out = []
        for name in dict.fromkeys(n for n, _ in self.procs):
            out.append(f"--- {name} ---\n" + "\n".join(self.log(name).splitlines()[-lines:]))
        return "\n".join(out)

    def stop_all(self) -> None:
        for _, proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for _, proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def wait_for(
    what: str,
    check: Callable[[], T],
    procs: Procs | None = None,
    timeout: float = 30.0,
    *,
    all_alive: bool = False,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll ``check`` until it returns something true, and return that.

    ``procs``: their logs go into the failure message. ``all_alive``: fail at once when any
    of them has exited (a crash would otherwise show only as a time-out). ``ignoring``:
    errors that mean "not yet" (a server still starting refuses connections).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all_alive and procs and (gone := procs.exited()):
            raise AssertionError(f"{', '.join(gone)} exited waiting for {what}\n{procs.logs()}")
        try:
            got = check()
        except ignoring:
            got = None
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}\n{procs.logs() if procs else ''}")
