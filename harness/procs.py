"""The queue's processes of one run: started from the repository, each with its own log,
waited on, and stopped by their own pids.

A failure says which process exited and shows the end of every log, since a process that
crashed otherwise shows only as a time-out.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from merritt_queue.core.queues import all_queue_names

REPO = Path(__file__).resolve().parent.parent
# Seconds a process has after SIGTERM (the queue's processes finish their step) before SIGKILL.
STOP_GRACE = 10.0
T = TypeVar("T")


class CommandFailed(AssertionError):
    """A command run to its end exited non-zero; the message holds its output."""


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    """Run ``manage.py args`` to its end with ``env``; its stdout."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode:
        raise CommandFailed(
            f"manage.py {args[0]} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout


@dataclass
class Procs:
    """Processes started under names, their output in ``<root>/<name>.log``.

    ``new_session``: the processes get their own session, so a Ctrl-C reaches the caller
    only and ``stop_all`` ends them in order.
    """

    env: dict[str, str]
    root: Path
    procs: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    new_session: bool = field(default=False, kw_only=True)
    label: str = field(default="harness", kw_only=True)
    # What runs the queue's commands (bench/machinery.py: one whose handlers do nothing).
    script: str = field(default="manage.py", kw_only=True)

    def manage(self, *args: str, timeout: float = 120) -> str:
        """Run a manage.py command to its end; its stdout."""
        return manage(self.env, *args, timeout=timeout)

    def spawn(
        self, name: str, argv: list[str], *, cwd: Path = REPO, **env: str
    ) -> subprocess.Popen:
        """Start ``argv`` in the background, ``env`` over the run's environment.

        The log is opened for appending: a process started again under the same name (a
        worker after a kill) adds to the story instead of wiping it.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{name}.log", "ab") as log:  # the child keeps its own copy
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=self.env | env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=self.new_session,
            )
        self.procs.append((name, proc))
        return proc

    def start(self, name: str, *argv: str, **env: str) -> subprocess.Popen:
        """Start ``python *argv`` in the background (``-m gunicorn ...``, ``manage.py ...``)."""
        return self.spawn(name, [sys.executable, *argv], cwd=REPO, **env)

    def worker(self, name: str, *queues: str, **env: str) -> subprocess.Popen:
        """An RQ worker on ``queues`` (default: every queue, in serving order)."""
        return self.start(name, self.script, "rqworker", *(queues or all_queue_names()), **env)

    def dispatcher(self, **env: str) -> subprocess.Popen:
        return self.start("dispatcher", self.script, "run_dispatcher", **env)

    def proc(self, name: str) -> subprocess.Popen:
        """The latest process started under ``name``."""
        return [p for n, p in self.procs if n == name][-1]

    def pids(self) -> dict[str, int]:
        """The pid of the latest process under each name."""
        return {name: p.pid for name, p in self.procs}

    def exited(self) -> list[str]:
        return [f"{name} (exit {p.returncode})" for name, p in self.procs if p.poll() is not None]

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self, lines: int = 25) -> str:
        """The last ``lines`` of every process's log."""
        out = []
        for name in dict.fromkeys(n for n, _ in self.procs):
            out.append(f"--- {name} ---\n" + "\n".join(self.log(name).splitlines()[-lines:]))
        return "\n".join(out)

    def stop_all(self) -> None:
        """SIGTERM to each, then SIGKILL to any still alive after ``STOP_GRACE`` seconds."""
        for _, proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + STOP_GRACE
        for name, proc in self.procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"{self.label}: {name} ignored SIGTERM; killing it", file=sys.stderr)
                proc.kill()
                proc.wait(timeout=STOP_GRACE)


def wait_for(
    what: str,
    check: Callable[[], T],
    procs: Procs | None = None,
    timeout: float = 30.0,
    *,
    all_alive: bool = False,
    ignoring: tuple[type[BaseException], ...] = (),
    poll: float = 0.1,
) -> T:
    """Poll ``check`` until it returns something true, and return that.

    ``procs``: their logs go into the failure (an ``AssertionError``). ``all_alive``: fail at
    once when any of them has exited. ``ignoring``: errors that mean "not yet" (a server
    still starting refuses connections).
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
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}\n{procs.logs() if procs else ''}")
