"""Issue 29, every request: a body limit on every path (4), a deadline on every page that
talks to ZooKeeper (5), /metrics closed without its token (9), the deployment checklist (10).
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


# --- 4: a body is judged by its headers on every path, before anything reads it --------------


def raw_request(live_server, path: str, headers: dict, body: bytes = b"x" * 100, wait=5.0):
    """Send headers announcing a body and only ``body`` of it; (status, headers, seconds).

    A server that waits for the rest of the body answers nothing: the socket's timeout fails
    the test instead of hanging it.
    """
    host, port = live_server.url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=wait) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        sock.sendall(head.encode() + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status_line, _, rest = answer.decode("latin-1").partition("\r\n")
    return int(status_line.split()[1]), rest, time.monotonic() - started


# With a CSRF cookie the CSRF check reads a form's whole body: to /tmp, for a multipart one.
CSRF = "csrftoken=" + "a" * 32
BIG = {
    "Content-Type": "multipart/form-data; boundary=xyz",
    "Content-Length": str(400 * 1024**2),
    "Cookie": CSRF,
}
ANONYMOUS_PATHS = ["/accounts/login/", "/admin/login/", "/accounts/password_reset/", "/no/such/"]


@pytest.fixture
def upload_tmp(settings, tmp_path):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "upload-tmp")
    Path(settings.FILE_UPLOAD_TEMP_DIR).mkdir()
    return Path(settings.FILE_UPLOAD_TEMP_DIR)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ANONYMOUS_PATHS)
def test_a_large_body_to_any_page_is_refused_by_its_length_unread(live_server, upload_tmp, path):
    status, headers, took = raw_request(live_server, path, BIG)
    assert status == 413, headers
    assert list(upload_tmp.iterdir()) == []
    assert took < 4


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ANONYMOUS_PATHS)
def test_a_chunked_body_to_a_page_that_takes_no_upload_is_refused(live_server, upload_tmp, path):
    headers = {
        "Content-Type": "multipart/form-data; boundary=xyz",
        "Transfer-Encoding": "chunked",
        "Cookie": CSRF,
    }
    status, _, _ = raw_request(live_server, path, headers, b"64\r\n" + b"x" * 100 + b"\r\n")
    assert status == 411
    assert list(upload_tmp.iterdir()) == []


@pytest.mark.django_db
def test_a_body_within_the_limit_reaches_the_page(client, settings):
    settings.MQ_MAX_REQUEST_BYTES = 1000
    response = client.post("/accounts/login/", {"username": "u", "password": "p" * 100})
    assert response.status_code == 200  # the form again: wrong credentials, read and judged
    response = client.post("/accounts/login/", {"username": "u", "password": "p" * 2000})
    assert response.status_code == 413
    assert b"MQ_MAX_REQUEST_BYTES" in response.content


# --- 9: /metrics needs its token unless the operator lists networks ---------------------------


@pytest.mark.django_db
def test_metrics_refuse_loopback_without_a_token_by_default(client, settings):
    from merritt_queue.project import settings as defaults

    settings.MQ_METRICS_ALLOW = defaults.MQ_METRICS_ALLOW
    settings.MQ_METRICS_TOKEN = "s3cret-metrics-token"
    # What a same-host proxy that adds no header sends: loopback, nothing forwarded.
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code in (401, 403)
    assert b"MQ_METRICS_TOKEN" in response.content
    response = client.get("/metrics", REMOTE_ADDR="::1")
    assert response.status_code in (401, 403)


# --- 10: the deployment checklist --------------------------------------------------------------


def documented_env(tmp_path) -> dict[str, str]:
    """deploy/env.example as a production host reads it, its placeholders made real: a random
    SECRET_KEY, and its directories under ``tmp_path`` (the checks look at them)."""
    env = {}
    for line in (REPO / "deploy/env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            env[name.strip()] = value.strip()
    return env | {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "MQ_WORK_DIR": str(tmp_path / "work"),
        "MQ_METRICS_DIR": str(tmp_path / "metrics"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }


def test_check_deploy_is_clean_with_the_documented_production_settings(tmp_path):
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    env |= documented_env(tmp_path)
    (tmp_path / "work").mkdir()
    (tmp_path / "metrics").mkdir()
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout, done.stdout


def test_debug_off_marks_the_cookies_secure_and_debug_on_leaves_them(tmp_path):
    show = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS > 0)"
    )
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    env |= {
        "DJANGO_SETTINGS_MODULE": "merritt_queue.project.settings",
        "MQ_WORK_DIR": str(tmp_path / "work"),
    }
    for debug, expected in (("false", "True True True True"), ("true", "False False False False")):
        done = subprocess.run(
            [sys.executable, "-c", show],
            cwd=REPO,
            env=env | {"DEBUG": debug},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.stdout.strip() == expected, done.stderr
    done = subprocess.run(
        [sys.executable, "-c", show],
        cwd=REPO,
        env=env | {"DEBUG": "false", "SESSION_COOKIE_SECURE": "false"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "False True True True", done.stderr
