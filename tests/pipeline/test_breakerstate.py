"""A breaker's record without ZooKeeper: what a failure and a closing do to it, how long a
refused job waits, and what a waiting job's message says (fast tier)."""

from __future__ import annotations

from merritt_queue.services.breakerstate import (
    OPEN,
    BreakerState,
    Policy,
    closed,
    counted,
    decode,
    encode,
    forgettable,
    label,
)

POLICY = Policy(threshold=2, cool_off=60)
NOW = 1_800_000_000.0


def test_the_threshold_opens_it_and_a_failed_probe_keeps_it_open_a_cool_off_more():
    once = counted(BreakerState("ezid"), "timed out", POLICY, NOW)
    assert not once.is_open and once.failures == 1
    twice = counted(once, "timed out", POLICY, NOW + 1)
    assert twice.state == OPEN and twice.since == NOW + 1 and twice.next_probe == NOW + 61
    probe_failed = counted(twice, "refused", POLICY, NOW + 70)
    assert probe_failed.next_probe == NOW + 130 and probe_failed.since == NOW + 1
    assert probe_failed.failures_total == 3 and probe_failed.last_error == "refused"


def test_a_threshold_of_zero_never_opens_it():
    off = Policy(threshold=0, cool_off=60)
    state = BreakerState("ezid")
    for _ in range(100):
        state = counted(state, "timed out", off, NOW)
    assert not state.is_open


def test_closing_forgets_the_count_and_says_since_when():
    opened = counted(counted(BreakerState("ezid"), "x", POLICY, NOW), "x", POLICY, NOW)
    shut = closed(opened, NOW + 100)
    assert not shut.is_open and shut.failures == 0 and shut.since == NOW + 100
    assert shut.failures_total == 2, "the total is /metrics' counter"


def test_a_refused_job_waits_until_the_probe_or_briefly_while_one_is_under_way():
    opened = BreakerState("ezid", state=OPEN, since=NOW, next_probe=NOW + 60)
    assert opened.wait(NOW + 20) == 40
    probing = BreakerState("ezid", state=OPEN, since=NOW, next_probe=NOW + 120, probe_at=NOW + 60)
    assert probing.wait(NOW + 61) == 10
    by_hand = BreakerState("ezid", state=OPEN, since=NOW, by="ada", reason="maintenance")
    assert by_hand.by_hand and by_hand.wait(NOW) > 0


def test_a_waiting_jobs_message_names_the_dependency_and_times_never_the_last_error():
    opened = BreakerState(
        "content:files.example", state=OPEN, since=NOW, next_probe=NOW + 60, last_error="secret"
    )
    text = opened.explain()
    assert text.startswith("content host files.example unreachable since ")
    assert "next probe" in text and "UTC" in text and "secret" not in text
    hand = BreakerState("ezid", state=OPEN, since=NOW, by="ada", reason="maintenance")
    assert hand.explain().startswith("EZID closed off by hand since ")
    assert hand.explain().endswith("by ada: maintenance")
    assert label("webhook:hooks.example.org") == "webhook host hooks.example.org"
    assert label("smtp") == "SMTP"


def test_what_is_stored_reads_back_and_damage_reads_closed():
    opened = counted(counted(BreakerState("ezid"), "x", POLICY, NOW), "x", POLICY, NOW)
    assert decode("ezid", encode(opened), 3) == BreakerState(**{**opened.__dict__, "version": 3})
    assert decode("ezid", b"\xff not json", 1) == BreakerState("ezid", version=1)
    assert decode("ezid", b'{"state": "open", "unknown": 1}', 2).is_open


def test_only_a_hosts_breaker_with_nothing_to_remember_is_removed():
    assert forgettable(BreakerState("content:h"))
    assert not forgettable(BreakerState("content:h", failures=1))
    assert not forgettable(BreakerState("content:h", by="ada"))
    assert not forgettable(BreakerState("ezid"))
