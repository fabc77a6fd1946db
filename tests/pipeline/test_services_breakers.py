"""The circuit breakers against a real ZooKeeper: what opens one, what a call meets while it
is open, the one probe that closes it, by-hand opening, and two workers sharing one."""

from __future__ import annotations

import json

import pytest

from merritt_queue.services import breakerguard
from merritt_queue.services.breakerguard import DependencyDown, MinterDown, Refusals
from merritt_queue.services.breakers import ROOT, Breakers, Policy, label, node_of, snapshot
from merritt_queue.services.errors import FetchError, MinterError


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def board(zk, clock):
    return Breakers(lambda: zk, Policy(threshold=3, cool_off=60), clock)


class Ezid:
    """An adapter whose answer the test sets."""

    def __init__(self) -> None:
        self.calls = 0
        self.error: Exception | None = None

    def mint(self, shoulder: str) -> str:
        self.calls += 1
        if self.error:
            raise self.error
        return f"{shoulder}1"


def ezid_down() -> MinterError:
    return MinterError(
        "EZID at http://ezid could not be reached: connection refused", retryable=True
    )


def test_transient_failures_in_a_row_open_the_breaker_and_then_no_call_is_made(board, clock):
    ezid = Ezid()
    minter = breakerguard.guarded(ezid, board, "ezid", ("mint",), MinterError)
    ezid.error = ezid_down()
    for _ in range(2):  # below the threshold: the adapter's own error, as before
        with pytest.raises(MinterError) as raised:
            minter.mint("ark:/99999/fk4")
        assert not isinstance(raised.value, DependencyDown)
    with pytest.raises(MinterDown) as opened:  # the third opens it: from now on, wait
        minter.mint("ark:/99999/fk4")
    assert opened.value.retryable and opened.value.wait == 60
    state = board.read("ezid")
    assert state.is_open and state.failures == 3 and state.failures_total == 3
    assert state.since == clock.now and state.next_probe == clock.now + 60
    assert "connection refused" in state.last_error

    clock.now += 30
    with pytest.raises(MinterDown) as refused:
        minter.mint("ark:/99999/fk4")
    assert ezid.calls == 3, "a call went to EZID while its breaker was open"
    assert refused.value.wait == 30
    assert str(refused.value) == (
        f"EZID unreachable since {_hms(clock.now - 30)}, next probe {_hms(clock.now + 30)}"
    ), "a waiting job's message names no other job's error (its URL, its ARK)"
    assert str(opened.value).startswith("EZID at http://ezid could not be reached"), (
        "the call that opened it says its own error"
    )


def _hms(epoch: float) -> str:
    import time

    return time.strftime("%H:%M:%S UTC", time.gmtime(epoch))


def test_a_probe_after_the_cool_off_closes_it_and_a_failed_probe_keeps_it_open(board, clock):
    ezid = Ezid()
    minter = breakerguard.guarded(ezid, board, "ezid", ("mint",), MinterError)
    ezid.error = ezid_down()
    for _ in range(3):
        with pytest.raises(MinterError):
            minter.mint("s")
    clock.now += 61
    with pytest.raises(MinterDown):  # the probe fails: open another cool-off
        minter.mint("s")
    assert ezid.calls == 4
    state = board.read("ezid")
    assert state.is_open and state.next_probe == clock.now + 60 and state.failures == 4

    clock.now += 61
    ezid.error = None
    assert minter.mint("s") == "s1"
    state = board.read("ezid")
    assert not state.is_open and state.failures == 0 and state.since == clock.now
    assert state.failures_total == 4, "the total counts every failure, for /metrics"
    assert minter.mint("s") == "s1" and ezid.calls == 6


def test_only_one_worker_takes_the_probe(board, zk, make_client, clock):
    other = Breakers(lambda: make_client(), Policy(threshold=3, cool_off=60), clock)
    for _ in range(3):
        board.failed("storage", "storage at http://s could not be reached: timed out")
    clock.now += 61
    first, second = board.admit("storage"), other.admit("storage")
    assert first.allowed and first.probe
    assert not second.allowed, "a second worker probed a dependency already being probed"
    assert second.state.wait(clock.now) == 10, "it waits for the probe's answer, not a cool-off"


def test_an_answer_that_is_not_transient_never_opens_a_breaker(board):
    content = Ezid()
    content.error = FetchError("http://depositor.example/a.jpg: 404 Not Found", retryable=False)
    fetch = breakerguard.guarded(content, board, "content:depositor.example", ("mint",), FetchError)
    for _ in range(10):
        with pytest.raises(FetchError) as raised:
            fetch.mint("x")
        assert not isinstance(raised.value, DependencyDown)
    assert not board.read("content:depositor.example").is_open
    assert board.read("content:depositor.example").failures == 0


def test_an_answer_ends_the_failures_in_a_row(board):
    for _ in range(2):
        board.failed("ezid", "timed out")
    minter = breakerguard.guarded(Ezid(), board, "ezid", ("mint",), MinterError)
    minter.mint("s")
    board.failed("ezid", "timed out")
    assert board.read("ezid").failures == 1 and not board.read("ezid").is_open


def test_opened_by_hand_it_is_never_probed_and_only_a_person_closes_it(board, clock):
    board.open_by_hand("ezid", "admin", "EZID's weekly maintenance")
    minter = breakerguard.guarded(Ezid(), board, "ezid", ("mint",), MinterError)
    clock.now += 10_000
    with pytest.raises(MinterDown) as refused:
        minter.mint("s")
    assert "closed off by hand" in str(refused.value) and "weekly maintenance" in str(refused.value)
    board.close_by_hand("ezid", "admin", "maintenance over")
    assert minter.mint("s") == "s1"
    state = board.read("ezid")
    assert not state.is_open and state.by == "admin" and state.reason == "maintenance over"


def test_a_callbacks_host_has_a_breaker_of_its_own(board):
    assert breakerguard.webhook_name("https://user:pw@Hooks.Example.org:8443/x?y") == (
        "webhook:hooks.example.org:8443"
    )
    assert label("webhook:hooks.example.org") == "webhook host hooks.example.org"
    for _ in range(3):
        board.failed("webhook:a.example", "500")
    assert board.read("webhook:a.example").is_open
    assert not board.read("webhook:b.example").is_open


def test_a_step_that_waits_on_its_own_learns_how_long_the_breaker_asks(board, clock):
    board.open_by_hand("ezid", "admin", "down")
    minter = breakerguard.guarded(Ezid(), board, "ezid", ("mint",), MinterError)
    with Refusals() as refused:
        try:
            minter.mint("s")
        except MinterError:
            pass
    assert refused.wait > 0


def test_the_snapshot_lists_the_sites_services_then_each_host(board, zk):
    for _ in range(3):
        board.failed("content:files.example", "timed out")
    shown = snapshot(zk)
    assert [s.name for s in shown] == [
        "ezid",
        "storage",
        "inventory",
        "smtp",
        "content:files.example",
    ]
    assert [s.state for s in shown] == ["closed"] * 4 + ["open"]
    assert zk.exists(node_of("content:files.example")).version >= 0
    assert ROOT.startswith("/merritt-queue/")
    data = json.loads(zk.get(node_of("content:files.example"))[0])
    assert data["state"] == "open" and data["failures"] == 3


def test_a_damaged_node_reads_closed_and_the_next_write_mends_it(board, zk):
    zk.create(node_of("ezid"), b"not json", makepath=True)
    assert not board.read("ezid").is_open
    board.failed("ezid", "timed out")
    assert board.read("ezid").failures == 1


def test_with_a_threshold_of_zero_nothing_is_counted_or_refused(zk, clock):
    off = Breakers(lambda: zk, Policy(threshold=0, cool_off=60), clock)
    ezid = Ezid()
    ezid.error = ezid_down()
    minter = breakerguard.guarded(ezid, off, "ezid", ("mint",), MinterError)
    for _ in range(10):
        with pytest.raises(MinterError) as raised:
            minter.mint("s")
        assert not isinstance(raised.value, DependencyDown)
    assert zk.exists(ROOT) is None


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_mail_server_that_refuses_connections_opens_the_smtp_breaker(board, clock):
    import smtplib

    from merritt_queue.services.smtpbreaker import SmtpDown, send_through

    port = closed_port()
    tries = []

    def send():
        tries.append(1)
        smtplib.SMTP("127.0.0.1", port, timeout=5)

    for _ in range(2):
        with pytest.raises(ConnectionRefusedError):
            send_through(board, send)
    with pytest.raises(SmtpDown) as opened:  # an OSError, as the callers catch
        send_through(board, send)
    assert isinstance(opened.value, OSError) and "SMTP unreachable since" in str(opened.value)
    with pytest.raises(SmtpDown):
        send_through(board, send)
    assert len(tries) == 3, "the mail server was tried while its breaker was open"
    clock.now += 61
    assert send_through(board, lambda: "sent") == "sent"
    assert not board.read("smtp").is_open


def test_a_refused_address_never_opens_the_smtp_breaker(board):
    import smtplib

    from merritt_queue.services.smtpbreaker import send_through

    def refused():
        raise smtplib.SMTPRecipientsRefused({"x@example.org": (550, b"no such user")})

    for _ in range(5):
        with pytest.raises(smtplib.SMTPRecipientsRefused):
            send_through(board, refused)
    assert not board.read("smtp").is_open and board.read("smtp").failures == 0


def test_a_hosts_breaker_with_nothing_left_to_remember_is_removed(board, zk, clock):
    for _ in range(3):
        board.failed("content:files.example", "timed out")
    clock.now += 61
    admitted = board.admit("content:files.example")
    assert admitted.probe
    board.succeeded(admitted)
    assert zk.exists(node_of("content:files.example")) is None
    assert [s.name for s in board.snapshot()] == ["ezid", "storage", "inventory", "smtp"]
    board.failed("ezid", "timed out")
    board.succeeded(board.admit("ezid"))
    assert zk.exists(node_of("ezid")) is not None, "the site's own services stay listed"


def test_a_worker_learns_of_another_workers_change_without_reading_each_call(
    board, zk, make_client, clock
):
    import time

    other = Breakers(lambda: make_client(), Policy(threshold=3, cool_off=60), clock)
    from merritt_queue.services.breakerwatch import watched

    assert board.admit("ezid").allowed  # read once, watched from now on
    assert node_of("ezid") in watched(zk)._known, "each call would read the node again"
    other.open_by_hand("ezid", "ada", "maintenance")
    deadline = time.monotonic() + 10
    while board.admit("ezid").allowed:  # the watch event comes on kazoo's own thread
        assert time.monotonic() < deadline, "the change never reached the other worker"
        time.sleep(0.01)
    other.close_by_hand("ezid", "ada", "over")
    while not board.admit("ezid").allowed:
        assert time.monotonic() < deadline, "the change never reached the other worker"
        time.sleep(0.01)
