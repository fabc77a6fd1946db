"""What the adapters tell a step's log (no ZooKeeper): a download's attempts from a pool's
threads, and a URL's credentials never kept."""

from __future__ import annotations

import hashlib

import pytest
import requests

from merritt_queue.core import steplog
from merritt_queue.services import calllog
from merritt_queue.services.fetch import DownloadItem, Fetcher

pytest_plugins = ["tests.httpserver"]
pytestmark = pytest.mark.usefixtures("loopback_only")


def test_downloads_on_a_pools_threads_tell_the_callers_log(http_server, session_factory, tmp_path):
    for name in ("a.txt", "b.txt"):
        (http_server.root / name).write_bytes(name.encode() * 10)
    flaky = http_server.behave("/c.txt", body=b"c" * 10, failures=1, failure_status=503)
    fetcher = Fetcher(allow_loopback=True, backoff=0.01, session_factory=session_factory)
    items = [DownloadItem(http_server.url_for(f"/{n}"), tmp_path / n) for n in ("a.txt", "b.txt")]
    md5 = hashlib.md5(b"c" * 10).hexdigest()
    items.append(DownloadItem(flaky, tmp_path / "c.txt", digest=("md5", md5)))
    log = steplog.StepLog()
    with steplog.recording(log):
        fetcher.download_many(items)
    gets = [e for e in log.entries() if e["k"] == "get"]
    assert sorted((e["url"].rsplit("/", 1)[1], e["try"], e["http"]) for e in gets) == [
        ("a.txt", 1, 200),
        ("b.txt", 1, 200),
        ("c.txt", 1, 503),
        ("c.txt", 2, 200),
    ]
    assert all(e["addr"] == "127.0.0.1" for e in gets)
    (digest,) = [e for e in log.entries() if e["k"] == "digest" and e["file"] == "c.txt"]
    assert digest["expected"] == digest["computed"] == {"md5": md5} and digest["ok"]


def test_a_calls_credentials_are_never_kept():
    answer = requests.Response()
    answer.status_code, answer._content = 500, b"storage\nbroke  badly"
    answer._content_consumed = True  # as requests leaves an answer it read whole
    log = steplog.StepLog()
    with steplog.recording(log):
        calllog.logged(
            "storage-call", "POST", "http://who:secret@storage.example/add", lambda: answer
        )
        with pytest.raises(requests.ConnectionError):
            calllog.logged(
                "storage-call",
                "GET",
                "http://who:secret@storage.example/state",
                _refuse,
            )
    first, second = log.entries()
    assert first == {
        "k": "storage-call",
        "call": "POST",
        "url": "http://***@storage.example/add",
        "http": 500,
        "ms": first["ms"],
        "excerpt": "storage broke badly",
    }
    assert "secret" not in str(second) and second["error"]


def _refuse():
    raise requests.ConnectionError("cannot reach http://who:secret@storage.example/state")


def test_a_download_urls_credentials_are_never_kept(http_server, session_factory, tmp_path):
    (http_server.root / "a.txt").write_bytes(b"a")
    url = http_server.url_for("/a.txt").replace("http://", "http://who:secret@")
    fetcher = Fetcher(allow_loopback=True, backoff=0.01, session_factory=session_factory)
    log = steplog.StepLog()
    with steplog.recording(log):
        try:
            fetcher.download(url, tmp_path / "a.txt")
        except Exception:  # refused or not: what the log kept is the point
            pass
        fetcher.head_sizes([url])
    assert log.entries() and "secret" not in str(log.entries())
    assert all("***@" in e["url"] for e in log.entries() if "url" in e)
