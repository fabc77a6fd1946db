"""``make demo`` checks every port before it starts anything, and a start that fails stops
what it started (issue 32).

Each test runs the real Makefile and scripts/services.sh from a copy of the project in its
tmp_path, so the demo's var/ is the test's own, never the developer's.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PORT_NAMES = ("ZK_PORT", "REDIS_PORT", "WEB_PORT", "CONTENT_PORT", "RECEIVER_PORT")


@pytest.fixture
def project(tmp_path) -> Path:
    """The Makefile and scripts in a folder of their own, over the project's venv."""
    copy = tmp_path / "project"
    copy.mkdir()
    shutil.copy2(ROOT / "Makefile", copy)
    shutil.copy2(ROOT / "pyproject.toml", copy)  # copy2: not newer than .venv/.installed
    shutil.copytree(ROOT / "scripts", copy / "scripts")
    (copy / ".venv").symlink_to(ROOT / ".venv")
    yield copy
    # A failing test still leaves nothing running (what it asserts is checked before this).
    services = [str(copy / "scripts" / "services.sh")]
    for pidfile in copy.glob("var/run/*.pid"):
        subprocess.run([*services, "proc-stop", str(pidfile)], check=False)
    subprocess.run([*services, "redis-stop", str(copy / "var" / "redis")], check=False)
    subprocess.run([*services, "zk-stop", str(copy / "var" / "zookeeper")], check=False)


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def demo(project: Path, ports: dict[str, int], *extra: str) -> subprocess.CompletedProcess:
    words = [f"{name}={port}" for name, port in ports.items()]
    words.append(f"REDIS_URL=redis://127.0.0.1:{ports['REDIS_PORT']}/0")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "--no-print-directory", "demo", *words, *extra],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def nothing_runs(project: Path, ports: dict[str, int]) -> None:
    assert not [p for p in ports.values() if listening(p)], "a demo service still listens"
    assert not list(project.glob("var/**/*.pid")), "a pid file is left"


def test_a_taken_port_is_named_with_its_variable_and_nothing_starts(project):
    ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports["CONTENT_PORT"]))
        taken.listen()
        run = demo(project, ports)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert f"port {ports['CONTENT_PORT']} (CONTENT_PORT) is taken" in out, out
    assert "CONTENT_PORT=<free port>" in out and "nothing started" in out
    assert "started" not in out.replace("nothing started", "")
    nothing_runs(project, {k: v for k, v in ports.items() if k != "CONTENT_PORT"})


def test_the_web_port_on_the_content_port_is_refused_before_anything_starts(project):
    """docs/development.md once said ``make demo ZK_PORT=21810 WEB_PORT=8001``: 8001 is the
    content server's port."""
    ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
    ports["WEB_PORT"] = ports["CONTENT_PORT"]
    run = demo(project, ports)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert f"WEB_PORT and CONTENT_PORT are both port {ports['WEB_PORT']}" in out, out
    nothing_runs(project, ports)


def test_a_start_that_fails_midway_stops_what_it_started(project):
    """ZooKeeper and Redis start, then the first manage.py command fails (PY=/bin/false)."""
    ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
    run = demo(project, ports, "PY=/bin/false")
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "ZooKeeper running in" in out and "Redis running in" in out, out
    assert "stopping what it started" in out
    assert "stopped ZooKeeper" in out and "stopped Redis" in out, out
    nothing_runs(project, ports)
