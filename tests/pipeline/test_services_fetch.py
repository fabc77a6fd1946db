"""Fetcher and network policy against a real HTTP server on 127.0.0.1 (no mocked requests)."""

import errno
import hashlib
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from merritt_queue.deposit.digest import Hashers
from merritt_queue.services import partfile
from merritt_queue.services.errors import FetchError
from merritt_queue.services.fetch import DownloadItem, Fetcher
from merritt_queue.services.netpolicy import check_url
from tests.httpserver import Reply, direct_session

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")

CONTENT = b"The quick brown fox jumps over the lazy dog\n" * 100
MD5 = hashlib.md5(CONTENT).hexdigest()
SHA256 = hashlib.sha256(CONTENT).hexdigest()


@pytest.fixture
def fetcher(session_factory):
    """Fetcher factory for the test server: loopback allowed, quick backoff, no proxies."""

    def make(**kwargs) -> Fetcher:
        options = {"allow_loopback": True, "backoff": 0.01, "session_factory": session_factory}
        return Fetcher(**(options | kwargs))

    return make


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def served(http_server):
    (http_server.root / "fox.txt").write_bytes(CONTENT)
    return http_server


@pytest.fixture
def out(tmp_path) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    return directory


# -- network policy -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, kind",
    [
        ("http://10.0.0.1/x", "private"),
        ("http://192.168.1.5/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://127.0.0.1:8080/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
        ("http://240.0.0.1/", "reserved"),
        ("http://[::ffff:10.1.2.3]/", "private"),
    ],
)
def test_policy_refuses_non_public_addresses(url, kind):
    with pytest.raises(FetchError) as info:
        check_url(url)
    assert kind in str(info.value)
    assert url in str(info.value)
    assert info.value.retryable is False


def test_policy_allows_only_what_is_asked():
    check_url("http://127.0.0.1/", allow_loopback=True)
    check_url("http://10.0.0.1/", allow_private=True)
    check_url("https://93.184.216.34/file")  # a public address literal: no DNS, no connection
    with pytest.raises(FetchError, match="link-local"):
        check_url("http://169.254.169.254/", allow_loopback=True, allow_private=True)
    with pytest.raises(FetchError, match="loopback"):
        check_url("http://localhost/", allow_private=True)


@pytest.mark.parametrize(
    "url, words",
    [
        ("ftp://127.0.0.1/x", "scheme 'ftp' is not allowed"),
        ("file:///etc/passwd", "scheme 'file' is not allowed"),
        ("http:///path", "names no host"),
        ("http://127.0.0.1:99999/", "port"),
    ],
)
def test_policy_refuses_malformed_urls(url, words):
    with pytest.raises(FetchError, match=words):
        check_url(url, allow_loopback=True)


# -- HEAD sizes ---------------------------------------------------------------------------


def test_head_sizes_known_unknown_and_failed(served, fetcher):
    unknown = served.behave("/unknown", body=b"abc", no_length=True)
    missing = served.url_for("/missing")
    refused = "http://127.0.0.1:1/nothing-listens-here"
    known = served.url_for("/fox.txt")
    sizes = fetcher().head_sizes([known, unknown, missing, refused, known])
    assert sizes == {known: len(CONTENT), unknown: None, missing: None, refused: None}
    assert [r.method for r in served.requests_for("/fox.txt")] == ["HEAD"]


def test_head_sizes_follow_redirects_and_apply_the_policy(served, fetcher):
    moved = served.behave("/moved", redirect="/fox.txt")
    evil = served.behave("/evil", redirect="http://169.254.169.254/latest/meta-data/")
    sizes = fetcher().head_sizes([moved, evil])
    assert sizes == {moved: len(CONTENT), evil: None}
    assert fetcher(allow_loopback=False).head_sizes([moved]) == {moved: None}


# -- download -----------------------------------------------------------------------------


def test_download_with_md5_and_sha256(served, out, fetcher):
    url = served.url_for("/fox.txt")
    result = fetcher().download(url, out / "fox.txt", digest=("md5", MD5))
    assert result.size == len(CONTENT)
    assert result.digests == {"md5": MD5}
    assert (out / "fox.txt").read_bytes() == CONTENT

    # Only the digest to check is computed (Processing digests the files it describes)...
    result = fetcher().download(url, out / "fox2.txt", digest=("SHA-256", SHA256.upper()))
    assert result.digests == {"sha256": SHA256}
    # ... unless more are asked for.
    result = fetcher().download(url, out / "fox3.txt", extra_algorithms=("md5", "sha256"))
    assert result.digests == {"sha256": SHA256, "md5": MD5}
    assert leftovers(out) == ["fox.txt", "fox2.txt", "fox3.txt"]


def test_request_asks_for_identity_encoding(served, out, fetcher):
    fetcher().download(served.url_for("/fox.txt"), out / "fox.txt")
    assert served.requests_for("/fox.txt")[0].headers["accept-encoding"] == "identity"


def test_digest_mismatch_leaves_nothing(served, out, fetcher):
    url = served.url_for("/fox.txt")
    wrong = "0" * 32
    with pytest.raises(FetchError) as info:
        fetcher().download(url, out / "fox.txt", digest=("md5", wrong))
    assert str(info.value) == f"md5 mismatch for {url}: expected {wrong}, got {MD5}"
    assert info.value.retryable is False
    assert leftovers(out) == []


def test_unknown_digest_algorithm_is_refused_before_fetching(served, out, fetcher):
    with pytest.raises(FetchError, match="unknown digest algorithm 'crc32'"):
        fetcher().download(served.url_for("/fox.txt"), out / "f", digest=("crc32", "00"))
    assert served.requests == []


def test_404_is_not_retried(served, out, fetcher):
    url = served.url_for("/gone.txt")
    with pytest.raises(FetchError) as info:
        fetcher().download(url, out / "gone.txt")
    assert str(info.value) == f"{url} returned 404 Not Found"
    assert info.value.retryable is False
    assert len(served.requests_for("/gone.txt")) == 1
    assert leftovers(out) == []


def test_503_twice_then_200_is_retried(served, out, fetcher):
    url = served.behave("/flaky", body=CONTENT, failures=2, failure_status=503)
    result = fetcher(retries=3).download(url, out / "flaky", digest=("md5", MD5))
    assert result.size == len(CONTENT)
    assert len(served.requests_for("/flaky")) == 3


def test_persistent_503_gives_up_retryable(served, out, fetcher):
    url = served.behave("/down", status=503)
    with pytest.raises(FetchError) as info:
        fetcher(retries=3).download(url, out / "down")
    assert str(info.value) == (
        f"GET {url} failed after 3 attempts: {url} returned 503 Service Unavailable"
    )
    assert info.value.retryable is True
    assert len(served.requests_for("/down")) == 3
    assert leftovers(out) == []


def test_429_retry_after_is_respected(served, out, fetcher):
    url = served.behave(
        "/busy", body=CONTENT, failures=1, failure_status=429, failure_headers={"Retry-After": "1"}
    )
    started = time.monotonic()
    fetcher(retries=2).download(url, out / "busy")
    assert time.monotonic() - started >= 0.9  # the backoff alone would be 0.01 s


def test_a_retry_after_of_non_ascii_digits_is_ignored(served, out, fetcher):
    """'²' passes str.isdigit() but not float(): the header is unusable, not a crash."""
    url = served.behave(
        "/busy2",
        body=CONTENT,
        failures=1,
        failure_status=429,
        failure_headers={"Retry-After": "\u00b2"},
    )
    fetcher(retries=2).download(url, out / "busy2")
    assert (out / "busy2").read_bytes() == CONTENT


def test_a_content_length_of_non_ascii_digits_is_no_content_length(served, out, fetcher):
    """http.client and urllib3 read the body to its end; our own reading must not crash."""
    url = served.behave("/sq", body=CONTENT, no_length=True, headers={"Content-Length": "\u00b2"})
    result = fetcher().download(url, out / "sq", extra_algorithms=["md5"])
    assert (out / "sq").read_bytes() == CONTENT and result.digests["md5"] == MD5


def test_connection_refused_is_retryable(out, fetcher):
    with pytest.raises(FetchError) as info:
        fetcher(retries=2).download("http://127.0.0.1:1/x", out / "x")
    assert "connection refused" in str(info.value)
    assert info.value.retryable is True


def test_short_body_is_detected(served, out, fetcher):
    url = served.behave("/short", body=CONTENT, announce=len(CONTENT) + 100)
    with pytest.raises(FetchError) as info:
        fetcher(retries=2).download(url, out / "short")
    assert f"server sent {len(CONTENT)} bytes, announced {len(CONTENT) + 100}" in str(info.value)
    assert info.value.retryable is True
    assert len(served.requests_for("/short")) == 2
    assert leftovers(out) == []


def test_long_body_is_caught_by_the_expected_size_and_the_surplus(served, out, fetcher):
    # An HTTP/1.1 client reads exactly the announced length; the manifest's size, or the
    # surplus bytes already received after the announced body, reveal the lie.
    url = served.behave("/long", body=CONTENT, announce=len(CONTENT) - 100)
    with pytest.raises(FetchError, match=f"size mismatch for {url}: expected {len(CONTENT)}"):
        fetcher().download(url, out / "long", expected_size=len(CONTENT))
    with pytest.raises(FetchError, match="more bytes than the 4300 of its Content-Length"):
        fetcher().download(url, out / "long", digest=("md5", MD5))
    assert leftovers(out) == []


def test_size_mismatch_against_expected(served, out, fetcher):
    url = served.url_for("/fox.txt")
    with pytest.raises(FetchError) as info:
        fetcher().download(url, out / "fox.txt", expected_size=12)
    assert f"size mismatch for {url}: expected 12 bytes, got {len(CONTENT)}" in str(info.value)
    assert info.value.retryable is False
    # Without a Content-Length the download stops as soon as it passes the expected size.
    url = served.behave("/nolength", body=CONTENT, no_length=True)
    with pytest.raises(FetchError, match="sent more than its declared size of 12 bytes; stopped$"):
        fetcher().download(url, out / "nolength", expected_size=12)
    assert leftovers(out) == []


def test_redirect_on_same_host_is_followed(served, out, fetcher):
    url = served.behave("/old", redirect="/middle", redirect_status=301)
    served.behave("/middle", redirect=served.url_for("/fox.txt"), redirect_status=307)
    result = fetcher().download(url, out / "fox.txt", digest=("md5", MD5))
    assert result.url == url and result.size == len(CONTENT)
    assert [r.path for r in served.requests] == ["/old", "/middle", "/fox.txt"]


@pytest.mark.parametrize(
    "target", ["http://10.0.0.1/secret", "http://169.254.169.254/latest/meta-data/"]
)
def test_redirect_to_disallowed_address_is_refused_before_connecting(
    served, out, loopback_only, target, fetcher
):
    url = served.behave("/bounce", redirect=target)
    with pytest.raises(FetchError) as info:
        fetcher().download(url, out / "x")
    host = target.split("/")[2]
    assert f"refused {target}" in str(info.value) and host in str(info.value)
    assert info.value.retryable is False
    assert set(loopback_only) == {"127.0.0.1"}  # nothing else was even attempted
    assert leftovers(out) == []


def test_too_many_redirects(served, out, fetcher):
    url = served.behave("/loop", redirect="/loop")
    with pytest.raises(FetchError, match="more than 2 redirects"):
        fetcher(max_redirects=2).download(url, out / "x")
    assert len(served.requests_for("/loop")) == 3


def test_loopback_refused_when_not_allowed(served, out, fetcher):
    url = served.url_for("/fox.txt")
    with pytest.raises(FetchError, match="loopback address 127.0.0.1"):
        fetcher(allow_loopback=False).download(url, out / "fox.txt")
    assert served.requests == []


def test_stalled_body_hits_the_read_timeout(served, out, fetcher):
    url = served.behave("/slow", body=CONTENT, stall_after=100, stall=10)
    started = time.monotonic()
    with pytest.raises(FetchError) as info:
        fetcher(timeout=0.5, retries=1).download(url, out / "slow")
    assert time.monotonic() - started < 5
    assert "read timeout" in str(info.value)
    assert info.value.retryable is True
    assert leftovers(out) == []


def test_slow_headers_hit_the_read_timeout(served, out, fetcher):
    url = served.behave("/sleepy", body=CONTENT, delay=10)
    started = time.monotonic()
    with pytest.raises(FetchError, match="read timed out"):
        fetcher(timeout=0.5, retries=1).download(url, out / "sleepy")
    assert time.monotonic() - started < 5


def test_max_bytes_announced_and_streamed(served, out, fetcher):
    url = served.url_for("/fox.txt")
    with pytest.raises(FetchError, match=f"is {len(CONTENT)} bytes, more than the limit of 1000"):
        fetcher().download(url, out / "fox.txt", max_bytes=1000)
    url = served.behave("/endless", body=CONTENT, no_length=True)
    with pytest.raises(FetchError, match="sent more than the limit of 1000 bytes; stopped"):
        fetcher(chunk_size=256).download(url, out / "endless", max_bytes=1000)
    assert leftovers(out) == []


def test_disk_full_is_retryable_and_leaves_nothing(served, out, monkeypatch, fetcher):
    def full(out_file, chunk, path):
        raise partfile.disk_error(path, OSError(errno.ENOSPC, "No space left on device"))

    monkeypatch.setattr(partfile, "write", full)
    with pytest.raises(FetchError) as info:
        fetcher().download(served.url_for("/fox.txt"), out / "fox.txt")
    assert str(info.value) == f"working disk full while writing {out / 'fox.txt.part'}"
    assert info.value.retryable is True
    assert leftovers(out) == []
    assert helper_threads() == []


def test_part_file_is_used_while_downloading(served, out, fetcher):
    # Stall mid-body and look: only the .part file exists until the download completes.
    url = served.behave("/watch", body=CONTENT, stall_after=1000, stall=1.0)
    result: list = []
    thread = threading.Thread(
        target=lambda: result.append(fetcher().download(url, out / "watch.txt"))
    )
    thread.start()
    deadline = time.monotonic() + 5
    while not (out / "watch.txt.part").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert leftovers(out) == ["watch.txt.part"]
    thread.join(5)
    assert leftovers(out) == ["watch.txt"] and result[0].size == len(CONTENT)


# -- sessions: one per thread, nothing carried from one request to the next ---------------


def test_a_fetcher_makes_one_session_per_thread_however_many_requests(served, out):
    made = []

    def factory():
        made.append(threading.current_thread().name)
        return direct_session()

    fetcher = Fetcher(allow_loopback=True, backoff=0.01, session_factory=factory)
    url = served.url_for("/fox.txt")
    for n in range(3):
        fetcher.with_declared_sizes({url: len(CONTENT)}).download(url, out / f"fox{n}.txt")
    moved = served.behave("/moved", redirect="/fox.txt")
    fetcher.download(moved, out / "moved.txt")
    # One HEAD runs in the caller's thread too; several run on threads with a session each.
    assert fetcher.head_sizes([url]) == {url: len(CONTENT)}
    assert made == [threading.current_thread().name]
    assert fetcher.head_sizes([url, moved]) == {url: len(CONTENT), moved: len(CONTENT)}
    # (A pool thread done with one HEAD may take the other.)
    assert len(made) in (2, 3) and threading.current_thread().name not in made[1:]


def test_a_cookie_a_server_sets_goes_to_the_next_hop_and_no_further(served, out, fetcher):
    """As with a session per attempt: the redirect's cookie is sent to where it leads, and
    never to a later download, whoever's it is."""

    def login(rec):
        target = served.url_for("/fox.txt")
        return Reply(302, b"", {"Location": target, "Set-Cookie": "hop=1; Path=/"})

    url = served.behave("/login", handler=login)
    plain = served.url_for("/fox.txt")
    one = fetcher()
    one.download(url, out / "first.txt")
    one.download(plain, out / "second.txt")
    assert one.head_sizes([plain]) == {plain: len(CONTENT)}
    one.download(url, out / "third.txt")
    sent = [(r.method, r.path, r.headers.get("cookie")) for r in served.requests]
    assert sent == [
        ("GET", "/login", None),
        ("GET", "/fox.txt", "hop=1"),
        ("GET", "/fox.txt", None),
        ("HEAD", "/fox.txt", None),
        ("GET", "/login", None),
        ("GET", "/fox.txt", "hop=1"),
    ]


# -- the helper threads: digest and write-back ---------------------------------------------


def helper_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("fetch-")]


@pytest.fixture
def small_flushes(monkeypatch):
    """Write-back every 1000 bytes, so a small download starts the write-back thread."""
    monkeypatch.setattr(partfile, "FLUSH_EVERY", 1000)
    calls: list[int] = []
    real = os.fdatasync

    def spy(fd):
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", spy)
    return calls


def test_the_part_file_is_fsynced_before_its_rename(served, out, fetcher, monkeypatch):
    synced: list[tuple[str, bool]] = []
    real = os.fsync

    def spy(fd):
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), (out / "fox.txt").exists()))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    result = fetcher().download(served.url_for("/fox.txt"), out / "fox.txt", digest=("md5", MD5))
    assert synced == [(str(out / "fox.txt.part"), False)]
    assert result.path.read_bytes() == CONTENT


def test_a_download_with_write_back_ends_its_threads(served, out, fetcher, small_flushes):
    before = helper_threads()
    result = fetcher(chunk_size=256).download(
        served.url_for("/fox.txt"), out / "fox.txt", digest=("md5", MD5)
    )
    assert result.digests == {"md5": MD5} and result.path.read_bytes() == CONTENT
    assert len(small_flushes) >= 1
    assert helper_threads() == before == []


def test_an_error_in_the_digest_thread_fails_the_download_and_leaves_nothing(
    served, out, fetcher, monkeypatch, small_flushes
):
    broken = RuntimeError("the digest broke")

    def update(self, chunk):
        raise broken

    monkeypatch.setattr(Hashers, "update", update)
    with pytest.raises(RuntimeError) as info:
        fetcher(chunk_size=256).download(
            served.url_for("/fox.txt"), out / "fox.txt", digest=("md5", MD5)
        )
    assert info.value is broken
    assert leftovers(out) == []
    assert helper_threads() == []


@pytest.mark.parametrize(
    "code, message, retryable",
    [
        (errno.EIO, "cannot write {part}: Input/output error", False),
        (errno.ENOSPC, "working disk full while writing {part}", True),
    ],
)
def test_an_error_in_the_write_back_thread_fails_the_download_and_leaves_nothing(
    served, out, fetcher, monkeypatch, small_flushes, code, message, retryable
):
    def fail(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fdatasync", fail)
    with pytest.raises(FetchError) as info:
        fetcher(chunk_size=256).download(
            served.url_for("/fox.txt"), out / "fox.txt", digest=("md5", MD5)
        )
    assert str(info.value) == message.format(part=out / "fox.txt.part")
    assert info.value.retryable is retryable
    assert leftovers(out) == []
    assert helper_threads() == []


def test_a_failed_final_fsync_fails_the_download_and_leaves_nothing(
    served, out, fetcher, monkeypatch
):
    def fail(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(FetchError) as info:
        fetcher().download(served.url_for("/fox.txt"), out / "fox.txt")
    assert str(info.value) == f"cannot write {out / 'fox.txt.part'}: Input/output error"
    assert leftovers(out) == []


def test_a_cut_connection_ends_the_helper_threads(served, out, fetcher, small_flushes):
    url = served.behave("/short", body=CONTENT, announce=len(CONTENT) * 2)
    with pytest.raises(FetchError, match="server sent"):
        fetcher(chunk_size=256, retries=1).download(url, out / "short", digest=("md5", MD5))
    assert leftovers(out) == []
    assert helper_threads() == []


def test_a_body_that_fits_one_buffer_is_digested_without_a_thread(
    served, out, fetcher, started_threads
):
    result = fetcher().download(served.url_for("/fox.txt"), out / "fox.txt", digest=("md5", MD5))
    assert result.digests == {"md5": MD5}
    assert [name for name in started_threads if name.startswith("fetch-")] == []
    # A body bigger than a buffer, or of unknown size, still has its digest thread.
    unsized = served.behave("/unsized", body=CONTENT, no_length=True)
    for n, url in enumerate([served.url_for("/fox.txt"), unsized]):
        started_threads.clear()
        result = fetcher(chunk_size=len(CONTENT) if n else 1024).download(
            url, out / f"more{n}.txt", digest=("md5", MD5)
        )
        assert result.digests == {"md5": MD5}
        assert started_threads.count("fetch-digest") == 1


def test_the_head_of_one_url_starts_no_thread(served, fetcher, started_threads):
    url = served.url_for("/fox.txt")
    assert fetcher().head_sizes([url, url]) == {url: len(CONTENT)}
    assert [n for n in started_threads if n.startswith("ThreadPoolExecutor")] == []
    assert fetcher().head_sizes([url, served.url_for("/other")]) == {
        url: len(CONTENT),
        served.url_for("/other"): None,
    }
    assert [n for n in started_threads if n.startswith("ThreadPoolExecutor")] != []


def test_a_failing_digest_of_a_one_buffer_body_fails_the_download_and_leaves_nothing(
    served, out, fetcher, monkeypatch
):
    broken = RuntimeError("the digest broke")

    def update(self, chunk):
        raise broken

    monkeypatch.setattr(Hashers, "update", update)
    with pytest.raises(RuntimeError) as info:
        fetcher().download(served.url_for("/fox.txt"), out / "fox.txt", digest=("md5", MD5))
    assert info.value is broken
    assert leftovers(out) == []


def test_the_reader_waits_while_every_buffer_awaits_its_digest(tmp_path):
    gate = threading.Event()

    class Slow(Hashers):
        def update(self, chunk):
            gate.wait(5)
            super().update(chunk)

    path = tmp_path / "f.part"
    with open(path, "wb") as out:
        sink = partfile.Sink(out, path, Slow(["md5"]), chunk_size=4, depth=2)
        for data in (b"abcd", b"efgh"):
            buffer = sink.buffer()
            buffer[:4] = data
            sink.put(buffer, 4)
        third: list = []
        reader = threading.Thread(target=lambda: third.append(sink.buffer()))
        reader.start()
        reader.join(0.3)
        assert reader.is_alive()  # both buffers are taken: memory stays at depth chunks
        gate.set()
        reader.join(5)
        assert len(third) == 1 and len(third[0]) == 4
        sink.close()
    assert path.read_bytes() == b"abcdefgh"


def test_a_body_not_from_http_client_is_read_through_urllib3():
    import io

    import requests
    import urllib3

    from merritt_queue.services import transport

    resp = requests.Response()
    resp.raw = urllib3.HTTPResponse(body=io.BytesIO(b"0123456789"), preload_content=False)
    read = transport.raw_readinto(resp)
    buffer = memoryview(bytearray(6))
    assert read(buffer) == 6 and bytes(buffer) == b"012345"
    assert read(buffer) == 4 and bytes(buffer[:4]) == b"6789"
    assert read(buffer) == 0


# -- download_many ------------------------------------------------------------------------


def test_download_many_all_good(served, out, fetcher):
    for i in range(5):
        (served.root / f"f{i}").write_bytes(CONTENT + bytes([i]))
    items = [DownloadItem(served.url_for(f"/f{i}"), out / f"f{i}") for i in range(5)]
    results = fetcher(max_workers=3).download_many(items)
    assert [r.path for r in results] == [out / f"f{i}" for i in range(5)]
    assert all(r.size == len(CONTENT) + 1 for r in results)


def test_download_many_reports_every_failure_and_cleans_up(served, out, fetcher):
    good = served.url_for("/fox.txt")
    missing = served.url_for("/missing")
    short = served.behave("/short", body=CONTENT, announce=len(CONTENT) * 2)
    items = [
        DownloadItem(good, out / "good"),
        DownloadItem(missing, out / "missing"),
        DownloadItem(short, out / "short"),
        DownloadItem(good, out / "bad-digest", digest=("md5", "f" * 32)),
    ]
    with pytest.raises(FetchError) as info:
        fetcher(retries=1).download_many(items)
    text = str(info.value)
    assert text.startswith("3 of 4 downloads failed:")
    assert f"{missing} returned 404 Not Found" in text
    assert f"{short}: server sent" in text
    assert "md5 mismatch" in text
    assert info.value.retryable is False  # a 404 will not heal by itself
    assert [url for url, _ in info.value.failures] == [missing, short, good]
    assert leftovers(out) == ["good"]


def test_download_many_refuses_two_items_with_one_destination(served, out, fetcher):
    url = served.url_for("/fox.txt")
    with pytest.raises(ValueError, match="two downloads write to"):
        fetcher().download_many([DownloadItem(url, out / "a"), DownloadItem(url, out / "a")])


# -- bounded memory -----------------------------------------------------------------------

BIG = 200 * 1024 * 1024
_CHILD = """
import resource, sys
from pathlib import Path
from merritt_queue.services.fetch import Fetcher
from tests.httpserver import direct_session
fetcher = Fetcher(allow_loopback=True, session_factory=direct_session)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = fetcher.download(sys.argv[1], Path(sys.argv[2]), digest=("md5", sys.argv[3]))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(result.size, before, after)
"""


def test_200_mb_download_keeps_memory_bounded(http_server, out):
    block = bytes(range(256)) * 4096  # 1 MiB

    def chunks():
        for _ in range(BIG // len(block)):
            yield block

    md5 = hashlib.md5()
    for chunk in chunks():
        md5.update(chunk)
    url = http_server.behave("/big", generate=(BIG, chunks))
    # A fresh interpreter, so the peak RSS measured is the download's, not earlier tests'.
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, url, str(out / "big.bin"), md5.hexdigest()],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.returncode == 0, child.stderr
    size, before_kib, after_kib = map(int, child.stdout.split())
    assert size == BIG == (out / "big.bin").stat().st_size
    assert (after_kib - before_kib) * 1024 < 50 * 1024 * 1024


def test_errors_survive_pickling_with_their_retry_flag():
    # RQ and multiprocessing pickle exceptions between processes.
    err = FetchError("working disk full while writing /w/x.part", retryable=True)
    err.failures = [("http://a/", "reason")]
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is FetchError and str(copy) == str(err)
    assert copy.retryable is True and copy.failures == err.failures
