"""Issue 29, finding 1: a name that rebinds between the check and the connection reaches
nothing the check did not judge.

The resolver is patched in this process: ``rebind.example`` first answers a public address,
then 127.0.0.1, where an internal server listens. Sockets are patched too, as a tiny
internet: a connection to the public address is delivered to a second server on 127.0.0.1
(the public one), a connection to loopback goes where it says, and any other address is
refused before a packet is sent. Whatever reaches the internal server was not judged.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest
import requests

from merritt_queue.services import pinned, transport, webhook
from merritt_queue.services.errors import FetchError, MinterError, StorageError
from merritt_queue.services.ezid import EzidMinter
from merritt_queue.services.fetch import Fetcher
from merritt_queue.services.merrittstorage import MerrittStorageClient
from merritt_queue.services.notifier import CallbackNotifier
from tests.httpserver import HttpServer, Reply, direct_session

pytest_plugins = ["tests.httpserver"]

PUBLIC = "93.184.216.34"
INTERNAL_CONTENT = b"the internal server's secret\n" * 3
PUBLIC_CONTENT = b"the depositor's file\n"
PROXY_VARIABLES = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]


@pytest.fixture
def servers(tmp_path):
    """(internal, public): both on 127.0.0.1, the public one reached only as ``PUBLIC``."""
    made = []
    for name, content in (("internal", INTERNAL_CONTENT), ("public", PUBLIC_CONTENT)):
        root = tmp_path / name
        root.mkdir()
        (root / "payload.bin").write_bytes(content)
        server = HttpServer(root).start()
        server.behave("/hook", body=name.encode() + b" says thanks\n")
        server.behave(
            "/ezid/shoulder/ark:/99999/fk4", status=201, body=b"success: ark:/99999/fk4x\n"
        )
        made.append(server)
    yield made
    for server in made:
        server.stop()


class Names:
    """A resolver's answers by name, each in turn, the last repeated; what it was asked."""

    def __init__(self) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.asked: list[str] = []

    def answer(self, name: str, *answers: str) -> None:
        """Each answer is one or more addresses, separated by commas."""
        self.answers[name] = [a.split(",") for a in answers]

    def lookup(self, name: str, port) -> list:
        self.asked.append(name)
        queue = self.answers[name]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        return [_info(address, port) for address in addresses]


def _info(address: str, port) -> tuple:
    if ":" in address:
        return (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))
    return (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))


@pytest.fixture
def names(monkeypatch) -> Names:
    """The process's resolver: the names given answer as told, numeric hosts as they are,
    and any other name is a test's mistake (it would have gone to a DNS server)."""
    names = Names()
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name in names.answers:
            return names.lookup(name, port)
        ipaddress.ip_address(name.strip("[]"))
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


@pytest.fixture
def internet(monkeypatch, servers):
    """Every connection's target; ``PUBLIC`` is delivered to the public server."""
    _, public = servers
    real = socket.socket.connect
    targets: list[tuple[str, int]] = []
    # A background thread an earlier test left (a client reconnecting, a delivery retrying)
    # may connect meanwhile: it is let through unrecorded; this test's own threads are not.
    earlier = set(threading.enumerate()) - {threading.current_thread()}

    def connect(sock, address):
        if threading.current_thread() in earlier:
            return real(sock, address)
        host, port = str(address[0]), int(address[1])
        targets.append((host, port))
        if host == PUBLIC:
            return real(sock, ("127.0.0.1", public.port))
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise OSError(errno.ENETUNREACH, f"test network: {host} is not reachable")
        return real(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return targets


@pytest.fixture
def rebinding(names, internet, servers):
    """The URL base of ``rebind.example`` on the internal server's port."""
    internal, _ = servers
    names.answer("rebind.example", PUBLIC, "127.0.0.1")
    names.answer("public.example", PUBLIC)
    return f"http://rebind.example:{internal.port}"


def assert_only_the_judged_address_was_reached(servers, internet, port: int) -> None:
    internal, public = servers
    assert internal.requests == []
    assert internet and set(internet) == {(PUBLIC, port)}
    assert public.requests
    assert {r.headers["host"] for r in public.requests} == {f"rebind.example:{port}"}


def test_a_download_connects_to_the_address_that_was_judged(rebinding, servers, internet, tmp_path):
    internal, _ = servers
    result = Fetcher(backoff=0.01).download(f"{rebinding}/payload.bin", tmp_path / "got.bin")
    assert (tmp_path / "got.bin").read_bytes() == PUBLIC_CONTENT
    assert result.size == len(PUBLIC_CONTENT)
    assert_only_the_judged_address_was_reached(servers, internet, internal.port)


def test_a_head_connects_to_the_address_that_was_judged(rebinding, servers, internet):
    internal, _ = servers
    url = f"{rebinding}/payload.bin"
    assert Fetcher().head_sizes([url]) == {url: len(PUBLIC_CONTENT)}
    assert_only_the_judged_address_was_reached(servers, internet, internal.port)


def test_a_redirect_hop_connects_to_the_address_that_was_judged(
    rebinding, servers, internet, tmp_path
):
    internal, public = servers
    public.behave("/moved", redirect=f"{rebinding}/payload.bin")
    url = f"http://public.example:{public.port}/moved"
    Fetcher(backoff=0.01).download(url, tmp_path / "got.bin")
    assert (tmp_path / "got.bin").read_bytes() == PUBLIC_CONTENT
    assert internal.requests == []
    assert set(internet) == {(PUBLIC, public.port), (PUBLIC, internal.port)}


def test_a_webhook_is_delivered_only_to_the_address_that_was_judged(rebinding, servers, internet):
    internal, _ = servers
    attempt = webhook.post(
        f"{rebinding}/hook",
        b"{}",
        secret="s",
        delivery_id="d-1",
        subscription_id="sub-1",
        event="batch.completed",
    )
    assert attempt.delivered, attempt.detail
    assert "internal" not in attempt.detail
    assert attempt.detail == "200 OK: public says thanks"
    assert_only_the_judged_address_was_reached(servers, internet, internal.port)


def test_a_callback_is_delivered_only_to_the_address_that_was_judged(rebinding, servers, internet):
    internal, _ = servers
    CallbackNotifier(backoff=0.01).notify(f"{rebinding}/hook", {"job": "j-1"})
    assert_only_the_judged_address_was_reached(servers, internet, internal.port)


def test_ezid_is_reached_at_the_address_that_was_judged(rebinding, servers, internet):
    internal, _ = servers
    minter = EzidMinter(f"{rebinding}/ezid", "apitest", "secret")
    assert minter.mint("ark:/99999/fk4") == "ark:/99999/fk4x"
    assert_only_the_judged_address_was_reached(servers, internet, internal.port)


def test_merritt_storage_is_reached_at_the_address_that_was_judged(rebinding, servers, internet):
    internal, public = servers
    public.route("/state/", lambda rec: Reply(404, b"no such object"))
    client = MerrittStorageClient(f"{rebinding}", "7777")
    assert client.versions("ark:/99999/fk4x") == []
    assert_only_the_judged_address_was_reached(servers, internet, internal.port)


@pytest.mark.parametrize("address", ["169.254.169.254", "::ffff:169.254.169.254"])
def test_an_operators_service_at_a_link_local_address_is_refused_unsent(names, internet, address):
    """Where cloud metadata answers: EZID's credentials must not be sent there."""
    names.answer("ezid.example", address)
    minter = EzidMinter("http://ezid.example/ezid", "apitest", "secret")
    with pytest.raises(MinterError, match="resolves to a link-local address 169.254.169.254"):
        minter.mint("ark:/99999/fk4")
    names.answer("storage.example", address)
    with pytest.raises(StorageError, match="resolves to a link-local address 169.254.169.254"):
        MerrittStorageClient("http://storage.example", "7777").versions("ark:/99999/fk4x")
    assert internet == []


def test_an_operators_service_behind_a_proxy_is_reached_through_it_unjudged(
    names, internet, servers, monkeypatch
):
    """The proxy resolves the name: the operator chose it, as documented."""
    proxy, _ = servers
    monkeypatch.setenv("http_proxy", proxy.url)
    minter = EzidMinter("http://ezid.example/ezid", "apitest", "secret")
    assert minter.mint("ark:/99999/fk4") == "ark:/99999/fk4x"
    assert names.asked == []
    assert internet == [("127.0.0.1", proxy.port)]
    [request] = proxy.requests
    assert request.path.startswith("http://ezid.example/ezid/shoulder/")


def test_a_numeric_host_connects_to_exactly_that_address(names, internet, servers, tmp_path):
    internal, _ = servers
    url = f"{internal.url}/payload.bin"
    Fetcher(allow_loopback=True).download(url, tmp_path / "got.bin")
    assert (tmp_path / "got.bin").read_bytes() == INTERNAL_CONTENT
    assert internet == [("127.0.0.1", internal.port)]
    assert names.asked == []


def test_with_loopback_allowed_a_name_is_fetched_from_loopback_and_named_in_host(
    names, internet, servers, tmp_path
):
    internal, _ = servers
    names.answer("files.example", "127.0.0.1")
    url = f"http://files.example:{internal.port}/payload.bin"
    Fetcher(allow_loopback=True).download(url, tmp_path / "got.bin")
    assert (tmp_path / "got.bin").read_bytes() == INTERNAL_CONTENT
    assert names.asked == ["files.example"]
    [request] = internal.requests
    assert request.headers["host"] == f"files.example:{internal.port}"


def test_each_judged_address_is_tried_in_turn(names, internet, servers, tmp_path):
    internal, _ = servers
    names.answer("two.example", "192.0.2.1,127.0.0.1")  # the first one unreachable
    url = f"http://two.example:{internal.port}/payload.bin"
    Fetcher(allow_loopback=True, allow_private=True).download(url, tmp_path / "got.bin")
    assert (tmp_path / "got.bin").read_bytes() == INTERNAL_CONTENT
    assert internet == [("192.0.2.1", internal.port), ("127.0.0.1", internal.port)]


def test_a_request_no_judgement_covers_is_refused_without_a_lookup(names, internet, servers):
    internal, _ = servers
    names.answer("unjudged.example", "127.0.0.1")
    with transport.strict_session(requests.Session()) as session:
        with pytest.raises(pinned.Unjudged):
            session.get(f"http://unjudged.example:{internal.port}/payload.bin", timeout=5)
        with pinned.judged(f"http://127.0.0.1:{internal.port}/", allow_loopback=True):
            with pytest.raises(pinned.Unjudged):  # another port than the one judged
                session.get(f"http://127.0.0.1:{internal.port + 1}/payload.bin", timeout=5)
    assert names.asked == []
    assert internet == []
    assert internal.requests == []


def test_a_judgement_ends_with_its_block(names, internet, servers):
    internal, _ = servers
    url = f"{internal.url}/payload.bin"
    with transport.strict_session(requests.Session()) as session:
        with pinned.judged(url, allow_loopback=True):
            assert session.get(url, timeout=5).content == INTERNAL_CONTENT
        with pytest.raises(pinned.Unjudged):
            session.get(url, timeout=5)
    assert len(internal.requests) == 1


def test_a_reused_session_connects_each_request_to_its_own_judgement(names, internet, servers):
    """A pooled connection to the first judgement's address must not serve the second."""
    internal, public = servers
    names.answer("moving.example", "127.0.0.1", PUBLIC)
    url = f"http://moving.example:{internal.port}/payload.bin"
    with transport.strict_session(requests.Session()) as session:
        with pinned.judged(url, allow_loopback=True):
            assert session.get(url, timeout=5).content == INTERNAL_CONTENT
        with pinned.judged(url, allow_loopback=True):
            assert session.get(url, timeout=5).content == PUBLIC_CONTENT
    assert internet == [("127.0.0.1", internal.port), (PUBLIC, internal.port)]
    assert (len(internal.requests), len(public.requests)) == (1, 1)


def test_a_refused_address_is_refused_before_any_connection(servers, internet):
    internal, _ = servers
    with pytest.raises(FetchError, match="resolves to a loopback address 127.0.0.1"):
        with pinned.judged(f"http://127.0.0.1:{internal.port}/"):
            pass
    assert internet == []


# -- TLS still checks the name ----------------------------------------------------------


@pytest.fixture
def tls_server(tmp_path, names, internet):
    """An HTTPS server on 127.0.0.1 whose certificate names ``secure.example`` only."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=secure.example",
            "-addext", "subjectAltName=DNS:secure.example",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    root = tmp_path / "tls"
    root.mkdir()
    (root / "payload.bin").write_bytes(PUBLIC_CONTENT)
    server = HttpServer(root)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server._httpd.socket = context.wrap_socket(server._httpd.socket, server_side=True)
    server.start()
    names.answer("secure.example", "127.0.0.1")
    names.answer("other.example", "127.0.0.1")
    yield server, cert
    server.stop()


def verifying(cert: Path):
    def make() -> requests.Session:
        session = direct_session()
        session.verify = str(cert)
        return session

    return make


def test_https_to_a_judged_address_still_checks_the_certificate_against_the_name(
    tls_server, tmp_path
):
    server, cert = tls_server
    fetcher = Fetcher(allow_loopback=True, retries=1, session_factory=verifying(cert))
    good = f"https://secure.example:{server.port}/payload.bin"
    fetcher.download(good, tmp_path / "good.bin")
    assert (tmp_path / "good.bin").read_bytes() == PUBLIC_CONTENT
    assert server.requests[0].headers["host"] == f"secure.example:{server.port}"
    with pytest.raises(FetchError, match="certificate|hostname|match"):
        fetcher.download(f"https://other.example:{server.port}/payload.bin", tmp_path / "bad.bin")
    assert len(server.requests) == 1
