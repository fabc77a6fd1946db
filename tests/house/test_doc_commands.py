"""The README's and docs/usage.md's ``make manage ARGS="..."`` commands, pasted into a shell
on a demo's host as a newcomer would, all work (issue 32).

The demo's host here: the settings file ``make demo-env`` writes (as ``make demo`` does),
pointed at the test's ZooKeeper chroot, Redis and a SQLite file of its own, with the demo's
content served by a local server in place of the demo's on port 8001. The shell gets none of
the test's own settings: what a command needs comes from that file, or it fails as it would
for a reader.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.house.test_doc_examples import DOCUMENTS, MANAGE, ROOT, commands

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

DEMO_CONTENT = "http://127.0.0.1:8001/"
# The test's own settings, which a newcomer's shell does not have.
NOT_A_NEWCOMERS = ("DEBUG", "ZK_", "REDIS_", "DATABASE_URL", "MQ_", "PROMETHEUS_", "DJANGO_")


def shown() -> list[tuple[str, str]]:
    return [(doc, c) for doc in DOCUMENTS for c in commands((ROOT / doc).read_text())]


def shell(command: str, demo_env: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(NOT_A_NEWCOMERS)}
    env = {k: v for k, v in env.items() if not k.startswith("MAKE")}
    env["DEMO_ENV"] = str(demo_env)
    return subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def demo_host(zk_config, redis, content, tmp_path) -> Path:
    """The settings file of a demo over the test's services, its database migrated and the
    demo profile in it."""
    demo_env = tmp_path / "demo.env"
    zk_port = zk_config.hosts.rsplit(":", 1)[1]
    url = os.environ["REDIS_URL"]
    made = subprocess.run(
        ["make", "--no-print-directory", "demo-env", f"DEMO_ENV={demo_env}"]
        + [f"ZK_PORT={zk_port}", f"REDIS_URL={url}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    assert "DEBUG=true" in demo_env.read_text()
    var = tmp_path / "var"
    with demo_env.open("a") as f:  # this host's own places, not the developer's var/
        f.write(f"ZK_CHROOT={zk_config.chroot}\nDATABASE_URL=sqlite:///{var}/db.sqlite3\n")
        for name in ("WORK_DIR", "STORAGE_ROOT", "MINTER_DIR", "METRICS_DIR"):
            f.write(f"MQ_{name}={var / name.lower()}\n")
    var.mkdir()
    for command in (
        'make manage ARGS="migrate --verbosity 0"',
        "make manage ARGS=\"shell -c 'from batches.models import Profile; "
        'Profile.objects.create(name=\\"demo\\", collection=\\"demo\\", '
        'minter_shoulder=\\"ark:/99999/fk4\\")\'"',
    ):
        run = shell(command, demo_env)
        assert run.returncode == 0, run.stdout + run.stderr
    return demo_env


def test_the_documents_show_make_manage_commands():
    assert len(shown()) >= 6


def test_every_shown_command_works_pasted_on_the_demos_host(demo_host, content):
    failed = []
    for doc, command in shown():
        run = shell(command.replace(DEMO_CONTENT, f"{content.url}/"), demo_host)
        if run.returncode != 0:
            failed.append(f"{doc}: {command}\n{run.stdout}{run.stderr}")
        elif MANAGE.match(command).group(1).split()[:2] == ["submit", "--profile"]:
            assert "bid" in run.stdout, f"{doc}: {command} submitted nothing:\n{run.stdout}"
    assert not failed, "\n\n".join(failed)


def test_without_a_demo_make_manage_says_to_start_one(tmp_path):
    run = shell('make manage ARGS="check_tree"', tmp_path / "none.env")
    assert run.returncode != 0
    assert "start the demo first (make demo)" in run.stdout + run.stderr
