"""The web app as deployed (deploy/systemd/mq-web.service): gunicorn serving
merritt_queue.project.wsgi.

A real gunicorn with two worker processes on a free 127.0.0.1 port, DEBUG off, on a migrated
file SQLite database; requests over real HTTP.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).parent / "gunicorn"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture
def gunicorn(tmp_path, zk_config):
    if not GUNICORN.exists():
        pytest.fail(f"{GUNICORN} is missing: gunicorn is a project dependency; run `make venv`")
    env = os.environ | {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DEBUG": "false",
        "SECRET_KEY": "test-" + "k" * 50,
        "ALLOWED_HOSTS": "127.0.0.1",
        "ZK_HOSTS": zk_config.hosts,
        "ZK_CHROOT": zk_config.chroot,
        "MQ_WORK_DIR": str(tmp_path / "work"),
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity=0"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=120,
    )
    port = free_port()
    log = open(tmp_path / "gunicorn.log", "wb")
    proc = subprocess.Popen(
        [
            str(GUNICORN),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "merritt_queue.project.wsgi",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(base + "/healthz")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "gunicorn did not answer:\n" + (tmp_path / "gunicorn.log").read_text()
                    ) from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_gunicorn_serves_the_app(gunicorn):
    status, body = get(gunicorn + "/healthz")
    assert status == 200 and json.loads(body)["ok"] is True
    status, body = get(gunicorn + "/accounts/login/")
    assert status == 200 and 'name="password"' in body
    # Pages need a login: the redirect is the app's own, through gunicorn.
    request = urllib.request.Request(gunicorn + "/jobs/")
    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as redirect:
        opener.open(request, timeout=10)
    assert redirect.value.code == 302
    assert redirect.value.headers["Location"].startswith("/accounts/login/")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
