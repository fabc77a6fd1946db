"""Real queue processes for the multi-process tests: manage.py commands and servers.

Each process runs ``python <argv>`` from the repository with the given environment, its
output in ``<root>/<name>.log``; ``logs()`` gives the end of every log for a failure
message. Nothing here knows which database, ZooKeeper or Redis the processes use: that is
all in ``env``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from merritt_queue.dispatcher import all_queue_names

REPO = Path(__file__).resolve().parent.parent


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

    def start(self, name: str, *argv: str) -> subprocess.Popen:
        """Start ``python *argv`` in the background (``-m gunicorn ...``, ``manage.py ...``)."""
        log = open(self.root / f"{name}.log", "wb")  # the child keeps its own copy
        proc = subprocess.Popen(
            [sys.executable, *argv], cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.procs.append((name, proc))
        return proc

    def worker(self, name: str, *queues: str) -> subprocess.Popen:
        """An RQ worker on ``queues`` (default: every queue, in serving order)."""
        return self.start(
            name,
            "manage.py",
            "rqworker",
            "--worker-class",
            "rq.worker.SimpleWorker",
            *(queues or all_queue_names()),
        )

    def dispatcher(self) -> subprocess.Popen:
        return self.start("dispatcher", "manage.py", "run_dispatcher")

    def exited(self) -> list[str]:
        return [f"{name} (exit {p.returncode})" for name, p in self.procs if p.poll() is not None]

    def logs(self, lines: int = 25) -> str:
        out = []
        for name, _ in self.procs:
            text = (self.root / f"{name}.log").read_text(errors="replace")
            out.append(f"--- {name} ---\n" + "\n".join(text.splitlines()[-lines:]))
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


def wait_for(what: str, check, procs: Procs, timeout: float = 30.0, *, all_alive: bool = False):
    """Poll ``check`` until it returns something true, and return that.

    ``all_alive``: fail at once, with the logs, when any process has exited (a crash would
    otherwise show only as a time-out).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all_alive and (gone := procs.exited()):
            raise AssertionError(f"{', '.join(gone)} exited waiting for {what}\n{procs.logs()}")
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}\n{procs.logs()}")
