"""The ``steps`` node's format and bounds, and what a depositor may read of it (no services)."""

from __future__ import annotations

import json
import threading

import pytest

from merritt_queue.core import steplog
from merritt_queue.core import steprecord as sr


def _attempt(n: int, entries: int = 3, step: str = "Downloading") -> dict:
    log = steplog.StepLog()
    for i in range(entries):
        log.add("get", url=f"https://example.org/{n}/{i}.txt", addr="10.1.2.3", http=200, bytes=i)
    return sr.summary(
        step=step,
        version=n,
        attempt=f"a{n}",
        by="worker h:1",
        at="2026-11-27 10:00:00 +0000",
        took=0.5,
        outcome="success",
        to="Processing",
        entries=log.entries(),
        more=log.more,
    )


def test_a_log_outside_an_attempt_keeps_nothing_and_inside_one_keeps_all():
    steplog.note("get", url="https://example.org/x")  # no attempt: goes nowhere, no error
    log = steplog.StepLog()
    with steplog.recording(log):
        steplog.note("get", url="https://example.org/x", http=200, skipped=None)
    assert log.entries() == [{"k": "get", "url": "https://example.org/x", "http": 200}]


def test_a_log_is_bounded_as_it_is_written_from_many_threads():
    log = steplog.StepLog()

    def add():
        for i in range(100):
            log.add("get", url="u" * 1000, names=[str(n) for n in range(100)], n=i)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = log.entries()
    assert len(entries) == steplog.MAX_ENTRIES and log.more == 400 - steplog.MAX_ENTRIES
    assert len(entries[0]["url"]) == steplog.MAX_TEXT
    assert len(entries[0]["names"]) == steplog.MAX_NAMES


def test_the_node_keeps_the_newest_attempts_within_its_bytes_and_counts_the_rest():
    record = sr.ABSENT
    for n in range(200):
        record, data = sr.append(record, _attempt(n, entries=steplog.MAX_ENTRIES))
        assert len(data) <= sr.MAX_BYTES
    assert record.attempts[-1]["attempt"] == "a199"
    assert record.dropped + len(record.attempts) == 200
    kept_entries = sum(len(a["entries"]) + a["more"] for a in record.attempts)
    assert record.dropped_entries + kept_entries == 200 * steplog.MAX_ENTRIES
    again = sr.decode(data)
    assert again.attempts == record.attempts and again.dropped == record.dropped


def test_one_attempt_too_big_alone_keeps_its_first_entries_and_counts_the_others():
    big = _attempt(1, entries=steplog.MAX_ENTRIES)
    for entry in big["entries"]:
        entry["excerpt"] = "x" * 2000  # as if the bounds of the log were larger
    record, data = sr.append(sr.ABSENT, big)
    assert len(data) <= sr.MAX_BYTES
    (kept,) = record.attempts
    assert kept["entries"] and kept["more"] == steplog.MAX_ENTRIES - len(kept["entries"])


def test_a_damaged_node_reads_as_empty_and_the_next_write_starts_afresh():
    damaged = sr.decode(b"{not json")
    assert damaged.damaged and damaged.exists and not damaged.attempts
    record, data = sr.append(damaged, _attempt(1))
    assert json.loads(data)["attempts"][0]["attempt"] == "a1" and not record.damaged


def test_the_depositors_view_names_no_address_no_internal_call_and_no_answer():
    log = steplog.StepLog()
    log.add(
        "get",
        url="https://example.org/a.txt",
        addr="10.1.2.3",
        http=503,
        bytes=0,
        ms=12,
        **{"try": 1},
        retry="https://example.org/a.txt returned 503 from 10.1.2.3:8080",
    )
    log.add("digest", file="a.txt", expected={"md5": "ab"}, computed={"md5": "ab"}, ok=True)
    log.add(
        "storage",
        url="http://storage.internal:8080/add",
        http=200,
        excerpt="<xml/>",
        ark="ark:/99999/fk4x",
        version=2,
        ok=True,
    )
    log.add("storage-state", url="http://storage.internal:8080/state", http=200)
    attempt = sr.summary(
        step="Downloading",
        version=3,
        attempt="a",
        by="worker h:1",
        at="",
        took=1.0,
        outcome="later",
        message="wait [fe80::1] 10.0.0.9",
        entries=log.entries(),
    )
    record, _ = sr.append(sr.ABSENT, attempt)
    shown = json.dumps(sr.public(record))
    for secret in (
        "10.1.2.3",
        "storage.internal",
        "<xml/>",
        "storage-state",
        "fe80",
        "10.0.0.9",
        "worker h:1",
    ):
        assert secret not in shown
    (one,) = sr.public(record)["attempts"]
    assert [e["kind"] for e in one["entries"]] == ["get", "digest", "storage"]
    assert one["entries"][0]["http"] == 503 and "(address)" in one["entries"][0]["retry"]
    assert one["entries"][2] == {
        "kind": "storage",
        "ark": "ark:/99999/fk4x",
        "version": 2,
        "ok": True,
    }


@pytest.mark.parametrize(
    "address", ["fd00::5", "fe80::1", "2001:db8::1", "[2001:db8::1]:443", "10.0.0.7", "::1"]
)
def test_no_ip_address_reaches_a_depositor_in_an_error(address):
    """The network policy's refusal names what a host resolves to ("resolves to private
    address fd00::5"): compressed IPv6 forms passed the scrub."""
    from merritt_queue.core.steprecord import scrub

    text = f"host h.example.org resolves to private address {address}; refused at 10:02:07"
    assert address.strip("[]").split("]")[0] not in scrub(text)
    assert scrub(text).endswith("refused at 10:02:07")  # a time is no address
