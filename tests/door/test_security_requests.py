"""Issue 29, every request: a body limit on every path (4), a deadline on every page that
talks to ZooKeeper (5), /metrics closed without its token (9), the deployment checklist (10).
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from merritt_queue.core import jobparams
from merritt_queue.core.store import QueueStore
from merritt_queue.project import runtime
from steering.models import AdminAction
from tests.cluster import start_client
from tests.door.test_security_door import raw_post

pytest_plugins = ["tests.cluster"]

REPO = Path(__file__).resolve().parents[2]


# --- 4: a body is judged by its headers on every path, before anything reads it --------------


def raw_request(live_server, path: str, headers: dict, body: bytes = b"x" * 100):
    return raw_post(live_server, path, headers, body, wait=5.0)


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
        "MQ_VAR_DIR": str(tmp_path / "var"),
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


@pytest.mark.django_db
def test_over_https_pages_redirect_and_the_probes_answer_over_http(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    web = Client()  # its handler reads the settings above at its first request
    page = web.get("/accounts/login/")
    assert page.status_code == 301 and page["Location"].startswith("https://")
    assert web.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https").status_code == 200
    assert web.get("/metrics").status_code == 403  # refused for want of its token, not moved
    assert web.get("/healthz").status_code != 301


# --- 5: with ZooKeeper away a page answers within its deadline, and does nothing later ------

PAYLOAD = re.compile(r'name="payload" value="([^"]+)"')
WAIT = 2.0  # MQ_WEB_ZK_WAIT in these tests


def failed_job(store) -> str:
    bid = store.new_batches.create_batch({"batchID": uuid.uuid4().hex, "collection": "demo"}).id
    configuration = {
        "collection": "demo",
        "payload_type": "file",
        "payload_url": "https://example.org/a.jpg",
    }
    jid = store.new_jobs.create_job(bid, configuration, metadata={"erc_what": "A title"})
    for status in ("Estimating", "Provisioning", "Failed"):
        store.moves.transition_job(jid, status, "broke" if status == "Failed" else None)
    return jid


@pytest.fixture
def away(own_zookeeper, settings, django_user_model):
    """The process's store on a ZooKeeper of the test's own, an administrator, and how to
    send a request that must answer within the deadline."""
    settings.ZK_HOSTS, settings.ZK_CHROOT = own_zookeeper.hosts, "/mq-deadline"
    settings.MQ_WEB_ZK_WAIT = WAIT
    runtime.close()
    store = runtime.get_store()
    admin = django_user_model.objects.create_user("ada", password="pw")
    admin.groups.set([Group.objects.get_or_create(name="administrator")[0]])
    web = Client()
    web.force_login(admin)

    def answered(send):
        """``send()``'s response, which must come within the deadline and some slack."""
        got: list = []
        started = time.monotonic()
        thread = threading.Thread(target=lambda: got.append(send()), daemon=True)
        thread.start()
        thread.join(WAIT + 8)
        assert got, f"no answer in {time.monotonic() - started:.0f} s"
        return got[0]

    yield own_zookeeper, store, web, answered
    runtime.close()


def stopped(zookeeper) -> None:
    zookeeper.stop()
    deadline = time.monotonic() + 30
    while runtime.client_state() == "CONNECTED" and time.monotonic() < deadline:
        time.sleep(0.1)


def fresh_store(hosts: str) -> QueueStore:
    client = start_client(hosts, "/mq-deadline")
    return QueueStore(client)


@pytest.mark.faults
@pytest.mark.django_db(transaction=True)
def test_the_edit_page_and_its_confirmation_answer_at_once_and_edit_nothing_later(away):
    zookeeper, store, web, answered = away
    jid = failed_job(store)
    job = store.jobs.get_job(jid)
    url = f"/actions/job.edit_resume/{jid}/"
    form = jobparams.current(job.configuration, job.identifiers, job.metadata)
    shown = web.post(url, form | {"version": job.status_version, "erc_what": "New title"})
    assert shown.status_code == 200, shown.content
    payload = PAYLOAD.search(shown.content.decode()).group(1)
    stopped(zookeeper)
    page = answered(lambda: web.get(url))
    assert page.status_code == 503
    assert "ZooKeeper is not reachable" in page.content.decode()
    done = answered(
        lambda: web.post(
            "/actions/job.edit_resume/execute", {"payload": payload, "reason": "asked"}
        )
    )
    assert done.status_code == 503
    text = done.content.decode()
    assert "ZooKeeper is not reachable" in text and "nothing was changed" in text
    zookeeper.start()
    time.sleep(5)  # a request left queued in the web's client would be sent by now
    later = fresh_store(zookeeper.hosts).jobs.get_job(jid)
    assert later.status == "Failed" and later.metadata["erc_what"] == "A title"
    record = AdminAction.objects.get(action="job.edit_resume")
    assert record.finished is not None and record.done == 0


@pytest.mark.faults
@pytest.mark.django_db(transaction=True)
def test_a_pause_confirmed_while_zookeeper_is_away_fails_at_once_and_never_happens(away):
    zookeeper, store, web, answered = away
    page = web.get("/actions/queue.pause/confirm")
    payload = PAYLOAD.search(page.content.decode()).group(1)
    stopped(zookeeper)
    done = answered(
        lambda: web.post("/actions/queue.pause/execute", {"payload": payload, "reason": "why"})
    )
    assert done.status_code == 503
    text = done.content.decode()
    assert "ZooKeeper is not reachable" in text and "nothing was changed" in text
    zookeeper.start()
    time.sleep(5)
    assert not fresh_store(zookeeper.hosts).pause.queue_paused()
    assert runtime.get_store().client.connected  # the next page finds ZooKeeper again


@pytest.mark.faults
@pytest.mark.django_db(transaction=True)
def test_a_request_made_while_connected_is_cut_when_the_connection_drops(away, monkeypatch):
    """The race the first check cannot see: connected when asked, gone before the answer."""
    zookeeper, store, web, answered = away
    page = web.get("/actions/queue.pause/confirm")
    payload = PAYLOAD.search(page.content.decode()).group(1)
    real = type(store.pause).pause_queue

    def pause_after_the_drop(self):
        stopped(zookeeper)
        return real(self)

    monkeypatch.setattr(type(store.pause), "pause_queue", pause_after_the_drop)
    done = answered(
        lambda: web.post("/actions/queue.pause/execute", {"payload": payload, "reason": "why"})
    )
    assert done.status_code == 503 and "ZooKeeper is not reachable" in done.content.decode()
    zookeeper.start()
    time.sleep(5)
    assert not fresh_store(zookeeper.hosts).pause.queue_paused()
