"""Issue 11, the network side: hostile servers cannot hold workers, grow files or slip past
the address policy.

Servers here are real sockets on 127.0.0.1: a raw one (``raw_server``) for what no honest
HTTP server does (headers a byte a second, headers cut off, more bytes than announced), and
``http_server`` for the rest. The pipeline tests run the real workers. Addresses outside
loopback are only ever resolved by a patched resolver, never contacted.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from merritt_queue.services.errors import FetchError, NotifyError
from merritt_queue.services.fetch import Fetcher
from merritt_queue.services.netpolicy import check_url
from merritt_queue.services.notifier import CallbackNotifier
from tests.rawserver import RawServer, read_head

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

# How long a raw server trickles before it gives up: a test on code without the deadline
# fails on its time bound instead of hanging.
TRICKLE_FOR = 40.0
# The deadlines under test are a few seconds; this leaves room for a noisy shared machine.
SLACK = 15.0


# -- a raw HTTP server ---------------------------------------------------------------------


class MethodServer(RawServer):
    """Reads each connection's request and hands its method to ``respond``."""

    def __init__(self, respond: Callable[[str, socket.socket, threading.Event], None]):
        self.respond = respond
        self.methods: list[str] = []
        super().__init__()

    def serve(self, conn: socket.socket) -> None:
        head = read_head(conn)
        if head is None:
            return
        method = head.split(b" ", 1)[0].decode()
        self.methods.append(method)
        self.respond(method, conn, self.stopping)


@pytest.fixture
def raw_server():
    servers: list[MethodServer] = []

    def start(respond) -> MethodServer:
        servers.append(MethodServer(respond))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def trickled_headers(method: str, conn: socket.socket, stopping: threading.Event) -> None:
    """A status line, then a header one byte a second that never ends."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    ends = time.monotonic() + TRICKLE_FOR
    while time.monotonic() < ends and not stopping.wait(1.0):
        conn.sendall(b"z")


def headers_cut_off(method: str, conn: socket.socket, stopping: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Le")


def longer_than_announced(method: str, conn: socket.socket, stopping: threading.Event) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n"
        b"0123456789and then some more bytes than announced"
    )


BIG = 5 * 1024 * 1024


def head_says_ten_bytes(method: str, conn: socket.socket, stopping: threading.Event) -> None:
    """HEAD announces 10 bytes; GET then sends 5 MiB with no Content-Length."""
    if method == "HEAD":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n")
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
    chunk = b"x" * 65536
    for _ in range(BIG // len(chunk)):
        conn.sendall(chunk)


def files_under(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


@pytest.fixture
def out(tmp_path) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    return directory


def fetcher(session_factory, **kwargs) -> Fetcher:
    options = {"allow_loopback": True, "backoff": 0.01, "retries": 1}
    return Fetcher(session_factory=session_factory, **(options | kwargs))


# -- 3. one wall-clock deadline per request ------------------------------------------------


@pytest.mark.usefixtures("loopback_only")
def test_trickled_headers_end_a_download_at_its_deadline(raw_server, session_factory, out):
    server = raw_server(trickled_headers)
    started = time.monotonic()
    with pytest.raises(FetchError) as caught:
        fetcher(session_factory, timeout=5, deadline=2).download(server.url, out / "payload.bin")
    assert time.monotonic() - started < 2 + SLACK
    assert str(caught.value) == (
        f"{server.url}: the server is too slow: no complete response headers after 2 s, "
        "the download deadline (MQ_FETCH_DEADLINE)"
    )
    assert caught.value.retryable is True
    assert files_under(out) == []


@pytest.mark.usefixtures("loopback_only")
def test_trickled_headers_end_a_head_request_within_the_read_timeout(raw_server, session_factory):
    server = raw_server(trickled_headers)
    started = time.monotonic()
    sizes = fetcher(session_factory, timeout=2).head_sizes([server.url])
    assert time.monotonic() - started < 2 + SLACK
    assert sizes == {server.url: None}
    assert server.methods == ["HEAD"]


@pytest.mark.usefixtures("loopback_only")
def test_many_slow_head_requests_share_one_budget(raw_server, session_factory):
    server = raw_server(trickled_headers)
    urls = [f"{server.url}?{n}" for n in range(40)]
    started = time.monotonic()
    sizes = fetcher(session_factory, timeout=1, max_workers=1).head_sizes(urls)
    # One after another, 40 HEADs of 1 s each; together they get 4 of them.
    assert time.monotonic() - started < 4 + SLACK
    assert sizes == dict.fromkeys(urls)


@pytest.mark.usefixtures("loopback_only")
def test_trickled_headers_end_a_callback_within_its_deadline(raw_server, session_factory):
    server = raw_server(trickled_headers)
    notifier = CallbackNotifier(
        timeout=2, retries=1, allow_loopback=True, session_factory=session_factory
    )
    started = time.monotonic()
    with pytest.raises(NotifyError) as caught:
        notifier.notify(server.url, {"job": "jid0000000001"})
    assert time.monotonic() - started < 2 + SLACK
    assert str(caught.value) == (
        f"callback {server.url} failed after 1 attempt: the receiver is too slow: no complete "
        "answer within 2 s (the callback deadline)"
    )


def test_a_job_whose_server_trickles_headers_fails_and_frees_the_worker(
    pipeline, raw_server, settings
):
    settings.MQ_FETCH_TIMEOUT = 3  # each HEAD of Estimating: one read timeout in all
    settings.MQ_FETCH_DEADLINE = 2
    server = raw_server(trickled_headers)
    started = time.monotonic()
    bid = pipeline.submit(type="file", payload_url=server.url)
    pipeline.run(bid, timeout=TRICKLE_FOR + 20)
    # Estimating's HEAD (3 s) and Downloading's GET (2 s), with room for a noisy machine.
    assert time.monotonic() - started < 3 + 2 + 2 * SLACK
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and job.last_successful_status == "Provisioning"
    assert job.message == (
        f"1 of 1 downloads failed:\n- {server.url}: the server is too slow: no complete "
        "response headers after 2 s, the download deadline (MQ_FETCH_DEADLINE)"
    )
    assert server.methods == ["HEAD", "GET"]


# -- 5. framing: cut-off headers and surplus bytes are failed downloads --------------------


@pytest.mark.usefixtures("loopback_only")
def test_a_response_cut_off_inside_its_headers_is_a_failed_download(
    raw_server, session_factory, out
):
    server = raw_server(headers_cut_off)
    with pytest.raises(FetchError) as caught:
        fetcher(session_factory, retries=2).download(server.url, out / "payload.bin")
    assert str(caught.value) == (
        f"GET {server.url} failed after 2 attempts: {server.url}: the server closed the "
        "connection inside the response headers"
    )
    assert files_under(out) == []


@pytest.mark.usefixtures("loopback_only")
def test_a_response_longer_than_its_content_length_is_a_failed_download(
    raw_server, session_factory, out
):
    server = raw_server(longer_than_announced)
    with pytest.raises(FetchError) as caught:
        fetcher(session_factory).download(server.url, out / "payload.bin")
    assert str(caught.value) == (
        f"{server.url}: the server sent more bytes than the 10 of its Content-Length; "
        "the response is not trusted and nothing was kept"
    )
    assert caught.value.retryable is False
    assert files_under(out) == []


# -- 5. size caps -------------------------------------------------------------------------


@pytest.mark.usefixtures("loopback_only")
def test_a_download_stops_as_soon_as_it_passes_its_declared_size(raw_server, session_factory, out):
    server = raw_server(head_says_ten_bytes)
    started = time.monotonic()
    with pytest.raises(FetchError) as caught:
        fetcher(session_factory, chunk_size=1024).download(
            server.url, out / "payload.bin", expected_size=10
        )
    assert str(caught.value) == (
        f"{server.url} sent more than its declared size of 10 bytes; stopped"
    )
    assert time.monotonic() - started < SLACK
    assert files_under(out) == []


def kept_download(job_dir: Path) -> list[Path]:
    """What a failed download left: its files, published or staged (an attempt's folder)."""
    return [
        p for p in job_dir.rglob("*") if p.is_file() and {"producer", ".attempts"} & set(p.parts)
    ]


def test_a_download_of_unknown_size_stops_at_mq_max_download_bytes(pipeline, http_server, settings):
    settings.MQ_MAX_DOWNLOAD_BYTES = 1000
    url = http_server.behave("/unsized.bin", body=b"x" * 50_000, no_length=True)
    bid = pipeline.submit(type="file", payload_url=url)
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and job.last_successful_status == "Provisioning"
    assert job.message == (
        f"1 of 1 downloads failed:\n- {url} sent more than the limit of 1000 bytes "
        "(MQ_MAX_DOWNLOAD_BYTES); stopped"
    )
    assert not kept_download(pipeline.root / "work" / "jobs" / job.jid)


def test_a_download_bigger_than_its_head_said_fails_naming_the_head(pipeline, raw_server):
    server = raw_server(head_says_ten_bytes)
    bid = pipeline.submit(type="file", payload_url=server.url)
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and job.last_successful_status == "Provisioning"
    assert job.message == (
        f"1 of 1 downloads failed:\n- {server.url} sent more than the size of 10 bytes its "
        "HEAD request gave; stopped"
    )
    assert not kept_download(pipeline.root / "work" / "jobs" / job.jid)


# -- 3. downloads in flight per host -------------------------------------------------------


def test_host_slots_bound_each_host_across_holders_and_expire(redis):
    from merritt_queue.services.hostslots import HostFull, HostSlots

    slots = HostSlots(redis, limit=2, ttl=2.0)
    first = slots.hold(["Example.org"])
    second = slots.hold(["example.org", "other.example"])
    with pytest.raises(HostFull) as full:
        slots.hold(["other.example", "example.org"])
    assert (full.value.host, full.value.limit) == ("example.org", 2)
    # All or nothing: the refused hold took no slot on other.example.
    assert slots.in_flight("other.example") == 1
    second.release()
    third = slots.hold(["example.org"])
    third.release()
    # ``first`` was never entered, so never renewed: like a killed worker's, it expires.
    deadline = time.monotonic() + 2.0 + SLACK
    while slots.in_flight("example.org") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert slots.in_flight("example.org") == 0
    first.release()
    assert HostSlots(redis, limit=0).hold(["example.org"] * 3).hosts == []


def test_a_held_lease_is_renewed_past_its_ttl(redis):
    from merritt_queue.services.hostslots import HostFull, HostSlots

    slots = HostSlots(redis, limit=1, ttl=3.0)
    with slots.hold(["example.org"]):
        time.sleep(5.0)
        assert slots.in_flight("example.org") == 1
        with pytest.raises(HostFull):
            slots.hold(["example.org"])
    assert slots.in_flight("example.org") == 0


def test_one_renewer_keeps_every_lease_of_a_process(redis):
    """Not a thread per download: one renews all the leases held, and ends with the last."""
    from merritt_queue.services.hostslots import HostSlots

    renewers = lambda: [t for t in threading.enumerate() if t.name == "host-slots"]  # noqa: E731
    slots = HostSlots(redis, limit=3, ttl=1.5)
    with slots.hold(["example.org"]), slots.hold(["example.org", "other.example"]):
        with slots.hold(["other.example"]):
            time.sleep(2.5)
            assert len(renewers()) == 1
            assert (slots.in_flight("example.org"), slots.in_flight("other.example")) == (2, 2)
        time.sleep(1.0)
        assert (slots.in_flight("example.org"), slots.in_flight("other.example")) == (2, 1)
    deadline = time.monotonic() + 1.5 + SLACK
    while renewers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not renewers()
    assert slots.in_flight("example.org") == 0


def test_an_unreachable_redis_lets_downloads_run_unbounded():
    from redis import Redis

    from merritt_queue.services.hostslots import HostSlots

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    with HostSlots(dead, limit=1).hold(["example.org"]) as lease:
        assert lease.hosts == []


def test_a_job_waits_in_downloading_while_its_host_is_full(pipeline, content, settings):
    from merritt_queue.services.hostslots import HostSlots

    settings.MQ_MAX_DOWNLOADS_PER_HOST = 1
    settings.MQ_HOST_WAIT_SECONDS = 0.2
    # No job is small here: a small one may take a slot beyond the limit (core.lanes).
    settings.MQ_SMALL_JOB_BYTES = 0
    busy = HostSlots(pipeline.redis, limit=1).hold(["127.0.0.1"])
    bid = pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg")
    pipeline.run(bid, until=lambda _b: pipeline.jobs(bid))
    (job,) = pipeline.jobs(bid)
    waiting = "waiting for a download slot"
    batch = pipeline.run(
        bid,
        until=lambda b: (
            b.status in ("Completed", "Failed")
            or waiting in pipeline.store.jobs.get_job(job.jid).message
        ),
    )
    job = pipeline.store.jobs.get_job(job.jid)
    assert batch.status not in ("Completed", "Failed"), job.message
    assert job.status == "Downloading"
    assert job.message == (
        "waiting for a download slot: 127.0.0.1 already has 1 download(s) in flight "
        "(MQ_MAX_DOWNLOADS_PER_HOST)"
    )
    busy.release()
    assert pipeline.run(bid).status == "Completed"
    assert HostSlots(pipeline.redis, limit=1).in_flight("127.0.0.1") == 0


# -- low: IPv6 forms that carry an IPv4 address --------------------------------------------


@pytest.fixture
def resolves_to(monkeypatch):
    """Make every name resolve to one address (the resolver only: nothing is contacted)."""

    def set_address(text: str) -> None:
        family = socket.AF_INET6 if ":" in text else socket.AF_INET
        sockaddr = (text, 80, 0, 0) if family == socket.AF_INET6 else (text, 80)

        def fake(host, port, *args, **kwargs):
            return [(family, socket.SOCK_STREAM, 6, "", sockaddr)]

        monkeypatch.setattr(socket, "getaddrinfo", fake)

    return set_address


def teredo(client: str) -> str:
    """A Teredo address (server 65.54.227.120) for ``client``, stored bit-inverted."""
    inverted = int(ipaddress.IPv4Address(client)) ^ 0xFFFFFFFF
    return str(ipaddress.IPv6Address((0x20010000_4136E378_8000_63BF << 32) | inverted))


# (address, allow_loopback, allow_private, kind of the IPv4 address it carries)
EMBEDDED_REFUSED = [
    ("2002:7f00:1::", False, False, "a loopback", "127.0.0.1"),  # 6to4
    ("2002:a00:1::", False, False, "a private", "10.0.0.1"),
    ("2002:a9fe:a9fe::1", True, True, "a link-local", "169.254.169.254"),
    (teredo("127.0.0.1"), False, True, "a loopback", "127.0.0.1"),
    (teredo("169.254.169.254"), True, True, "a link-local", "169.254.169.254"),
]


@pytest.mark.parametrize(("address", "loopback", "private", "kind", "ipv4"), EMBEDDED_REFUSED)
def test_ipv6_forms_carrying_a_forbidden_ipv4_address_are_refused(
    resolves_to, address, loopback, private, kind, ipv4
):
    resolves_to(address)
    with pytest.raises(FetchError) as caught:
        check_url("http://sneaky.example/a.jpg", allow_loopback=loopback, allow_private=private)
    assert str(caught.value) == (
        f"refused http://sneaky.example/a.jpg: host sneaky.example resolves to {address}, "
        f"which carries {kind} IPv4 address {ipv4}"
    )
    assert caught.value.retryable is False


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::a00:1",  # local-use NAT64
        "::7f00:1",  # IPv4-compatible 127.0.0.1
        "::ffff:169.254.169.254",  # IPv4-mapped
        "::ffff:10.1.2.3",
    ],
)
def test_nat64_compatible_and_mapped_forms_of_private_addresses_are_refused(resolves_to, address):
    resolves_to(address)
    with pytest.raises(FetchError, match=r"^refused http://sneaky\.example/a\.jpg: host "):
        check_url("http://sneaky.example/a.jpg")


@pytest.mark.parametrize("address", ["2002:808:808::1", "2001:4860:4860::8888", "8.8.8.8"])
def test_public_addresses_and_6to4_of_a_public_address_are_allowed(resolves_to, address):
    resolves_to(address)
    assert [str(a) for a in check_url("http://public.example/a.jpg")] == [
        str(ipaddress.ip_address(address))
    ]


def test_a_public_redirect_to_6to4_of_a_private_address_is_refused(resolves_to):
    resolves_to("2002:c0a8:101::")  # 192.168.1.1
    with pytest.raises(
        FetchError, match=re.escape("carries a non-public IPv4 address 192.168.1.1")
    ):
        check_url("http://next.example/", allow_private=True, from_public=True)


# -- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "check_id"),
    [
        ("MQ_MAX_DOWNLOAD_BYTES", -1, "mq.E020"),
        ("MQ_MAX_DOWNLOADS_PER_HOST", -1, "mq.E021"),
        ("MQ_HOST_WAIT_SECONDS", 0, "mq.E021"),
        ("MQ_FETCH_TIMEOUT", 0, "mq.E022"),
        ("MQ_FETCH_DEADLINE", -5, "mq.E022"),
    ],
)
def test_network_limits_out_of_range_fail_their_check(settings, name, value, check_id):
    from merritt_queue.project import checks

    assert checks.check_download_limits() == []
    setattr(settings, name, value)
    (error,) = checks.check_download_limits()
    assert error.id == check_id
    assert f"{name}={value!r}" in error.msg
