"""Depositor URLs get nothing from the operator's environment: no ~/.netrc credentials, no proxy.

Every call here uses the services' own default session, as the workers do (no test session
factory, which would ignore the environment whatever the code does). The netrc names
127.0.0.1, where the depositor's server listens; the proxy is a second server on 127.0.0.1
that would answer 404 to anything sent through it.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import requests

from merritt_queue.services import transport, webhook
from merritt_queue.services.fetch import DownloadItem, Fetcher
from merritt_queue.services.notifier import CallbackNotifier
from tests.httpserver import HttpServer

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")

LOGIN, PASSWORD = "operator", "the-operators-own-password"
CONTENT = b"deposited content\n" * 200
PROXY_VARIABLES = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]


@pytest.fixture(params=["NETRC", "~/.netrc"])
def operator_netrc(request, tmp_path, monkeypatch) -> None:
    """An operator's netrc naming 127.0.0.1, where $NETRC says or in the home directory."""
    home = tmp_path / "home"
    home.mkdir()
    netrc = home / ".netrc" if request.param == "~/.netrc" else tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {LOGIN} password {PASSWORD}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    if request.param == "NETRC":
        monkeypatch.setenv("NETRC", str(netrc))
    else:
        monkeypatch.delenv("NETRC", raising=False)
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def proxy(tmp_path, monkeypatch):
    """A proxy every proxy variable names, for every host."""
    root = tmp_path / "proxy"
    root.mkdir()
    server = HttpServer(root).start()
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.setenv("HOME", str(root))
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
        if name != "no_proxy":
            monkeypatch.setenv(name, server.url)
            monkeypatch.setenv(name.upper(), server.url)
    yield server
    server.stop()


@pytest.fixture
def served(http_server) -> HttpServer:
    (http_server.root / "payload.bin").write_bytes(CONTENT)
    http_server.behave("/moved", redirect="/payload.bin")
    http_server.behave("/hook", body=b"thanks\n")
    return http_server


def download(server: HttpServer, out: Path) -> None:
    fetcher = Fetcher(allow_loopback=True, backoff=0.01)
    result = fetcher.download(server.url_for("/payload.bin"), out / "payload.bin")
    assert result.size == len(CONTENT)


def download_redirected(server: HttpServer, out: Path) -> None:
    fetcher = Fetcher(allow_loopback=True, backoff=0.01, max_workers=2)
    items = [
        DownloadItem(server.url_for(p), out / p.strip("/")) for p in ("/moved", "/payload.bin")
    ]
    assert [r.size for r in fetcher.download_many(items)] == [len(CONTENT)] * 2


def head(server: HttpServer, out: Path) -> None:
    url = server.url_for("/payload.bin")
    assert Fetcher(allow_loopback=True).head_sizes([url]) == {url: len(CONTENT)}


def callback(server: HttpServer, out: Path) -> None:
    CallbackNotifier(allow_loopback=True, backoff=0.01).notify(server.url_for("/hook"), {"a": 1})


def notification(server: HttpServer, out: Path) -> None:
    attempt = webhook.post(
        server.url_for("/hook"),
        b"{}",
        secret="s",
        delivery_id="d-1",
        subscription_id="1",
        event="e",
        allow_loopback=True,
    )
    assert attempt.delivered, attempt.detail


CALLS = [download, download_redirected, head, callback, notification]


def test_the_netrc_here_is_one_that_requests_would_send(operator_netrc, served):
    """Without this, the tests below could pass on a netrc that requests never reads."""
    with requests.Session() as session:
        session.get(served.url_for("/payload.bin"), timeout=10).raise_for_status()
    [request] = served.requests
    expected = base64.b64encode(f"{LOGIN}:{PASSWORD}".encode()).decode()
    assert request.headers.get("authorization") == f"Basic {expected}"


@pytest.mark.parametrize("call", CALLS)
def test_a_depositor_url_is_never_sent_the_operators_netrc_credentials(
    operator_netrc, served, tmp_path, call
):
    call(served, tmp_path)
    assert served.requests
    assert [r.headers.get("authorization") for r in served.requests] == [None] * len(
        served.requests
    )


@pytest.mark.parametrize("call", CALLS)
def test_a_depositor_url_is_fetched_directly_whatever_proxy_the_environment_names(
    proxy, served, tmp_path, call
):
    call(served, tmp_path)
    assert served.requests
    assert proxy.requests == []


def test_a_ca_bundle_the_environment_names_is_still_the_one_verified_against(monkeypatch):
    """It decides whom we trust, sends nothing: kept, as requests would keep it."""
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/the-operators-ca.pem")
    transport._ca_bundle.cache_clear()
    try:
        with transport.strict_session(requests.Session()) as session:
            assert session.verify == "/etc/ssl/the-operators-ca.pem"
        with transport.strict_session(requests.Session()) as session:
            session.verify = False
            assert transport.strict_session(session).verify is False
    finally:
        transport._ca_bundle.cache_clear()
