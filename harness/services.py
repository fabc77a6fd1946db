"""The servers of ``scripts/services.sh`` (ZooKeeper, an ensemble, Redis, PostgreSQL) as a
run asks for them, and the free ports they go on."""

from __future__ import annotations

import socket
import subprocess

from .procs import REPO, CommandFailed

SERVICES = REPO / "scripts" / "services.sh"


def services(*args: str, timeout: float = 120) -> str:
    """Run ``services.sh args`` to its end; its stdout, stripped."""
    done = subprocess.run(
        ["bash", str(SERVICES), *args], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode:
        raise CommandFailed(f"services.sh {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout.strip()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (a server started later may still lose it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
