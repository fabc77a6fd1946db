"""Why a job or batch waits, decided from facts alone (merritt_queue.core.waiting): every
reason, the order the rules are tried in, the words a depositor may read, and the estimate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from merritt_queue.core import waiting as w
from merritt_queue.core.tree import lock_name
from merritt_queue.core.waitestimate import Rate, estimate

NOW = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
ARK = "ark:/99999/fk4abc"


def job(status="Pending", **fields) -> w.Item:
    values = {"collection": "demo", "ark": ARK, "space_needed": 1000}
    values.update(fields)
    return w.Item("job", "jid0000000002", status, **values)


def batch(status="Pending", **fields) -> w.Item:
    return w.Item("batch", "bid0000000001", status, collection="demo", **fields)


PAUSE = w.Pause(NOW - timedelta(minutes=5), "alice", reason="storage upgrade")
WINDOW_PAUSE = w.Pause(NOW, "", 7, NOW + timedelta(hours=2), "EZID downtime")
HOLD = w.Hold("bob", "bad manifests", NOW - timedelta(hours=1))
WINDOW_HOLD = w.Hold("scheduler", "weekly", NOW, 9, NOW + timedelta(hours=1))
EZID = w.Breaker("EZID", NOW - timedelta(minutes=3), NOW + timedelta(minutes=2), ("Processing",))


def code(item, **facts):
    found = w.decide(item, w.QueueFacts(**facts))
    return found.code if found else None


def test_finished_failed_and_running_items_do_not_wait():
    for status in ("Completed", "Failed", "Deleted"):
        assert code(job(status), pause=PAUSE) is None
        assert code(batch(status), pause=PAUSE) is None
    assert code(job("Downloading", locked=True), pause=PAUSE) is None
    assert code(batch("Pending", locked=True)) is None


def test_a_batch_whose_jobs_are_under_way_has_no_reason_of_its_own():
    assert code(batch("Processing")) is None
    assert code(batch("Processing"), pause=PAUSE) == w.QUEUE_PAUSED
    assert code(batch("Pending")) == w.WORKER


def test_held_items_say_who_held_them_and_why():
    assert code(job("Held", message="held by admin:carol")) == w.HELD
    found = w.decide(job("Held", message="held by admin:carol"), w.QueueFacts())
    assert "held by admin:carol" in found.words
    found = w.decide(job("Held"), w.QueueFacts(holds={"demo": HOLD}))
    assert found.code == w.COLLECTION_HELD
    assert "by bob" in found.words and "bad manifests" in found.words
    assert "bob" not in found.as_json(public=True)["words"]
    assert found.as_json(public=False)["words"] == found.words
    # A Pending job the sweep has not moved to Held yet waits for the hold too.
    assert code(job("Pending"), holds={"demo": HOLD}) == w.COLLECTION_HELD
    # A job past Pending is not stopped by its collection's hold.
    assert code(job("Downloading"), holds={"demo": HOLD}) == w.WORKER
    assert code(batch("Held"), holds={"demo": HOLD}) == w.COLLECTION_HELD
    assert code(batch("Held")) == w.HELD


def test_a_maintenance_window_says_when_it_ends():
    found = w.decide(job("Downloading"), w.QueueFacts(pause=WINDOW_PAUSE))
    assert found.code == w.MAINTENANCE_WINDOW
    assert found.ends_at == NOW + timedelta(hours=2)
    assert "window 7" in found.words and "EZID downtime" in found.words
    assert found.as_json(public=True)["ends_at"] == "2026-11-27T12:00:00Z"
    held = w.decide(job("Held"), w.QueueFacts(holds={"demo": WINDOW_HOLD}))
    assert held.code == w.MAINTENANCE_WINDOW and held.ends_at == NOW + timedelta(hours=1)


def test_a_pause_by_a_person_names_them_to_staff_only():
    found = w.decide(job("Estimating"), w.QueueFacts(pause=PAUSE))
    assert found.code == w.QUEUE_PAUSED
    assert "alice" in found.words and "2026-11-27 09:55 UTC" in found.words
    assert "alice" not in found.as_json(public=True)["words"]


def test_merritt_services_have_their_steps_whatever_our_pause():
    facts = {"pause": PAUSE}
    assert code(job("Storing", store_record="merritt-queue"), **facts) == w.MERRITT_STORAGE
    assert code(job("Recording", store_record="merritt-queue"), **facts) == w.MERRITT_INVENTORY
    assert code(job("Storing", store_record="local"), **facts) == w.QUEUE_PAUSED
    assert code(job("Storing", store_record="merritt-api")) == w.WORKER


def test_a_dependency_down_gives_its_next_probe():
    found = w.decide(job("Processing"), w.QueueFacts(breakers=(EZID,)))
    assert found.code == w.DEPENDENCY_DOWN
    assert found.words == "EZID unreachable since 2026-11-27 09:57 UTC"
    assert found.ends == "at the next probe, 2026-11-27 10:02 UTC, if it answers"
    assert code(job("Downloading"), breakers=(EZID,)) == w.WORKER


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        ("Provisioning", "waiting for disk space: would be 91% full", w.DISK_SPACE),
        ("Estimating", "waiting for disk space: at its threshold", w.DISK_SPACE),
        ("Downloading", "waiting for a download slot: h.example already has 2", w.HOST_SLOTS),
        ("Processing", "local id x is being resolved by another job", w.LOCALID_LOCK),
        ("Storing", f"{ARK} is being stored by another job", w.STORAGE_LOCK),
        ("Recording", f"{ARK} is being recorded by another job", w.INVENTORY_LOCK),
        ("Downloading", "waiting for disk space to unpack big.zip: ...", w.DISK_SPACE),
        ("Processing", "EZID: 503; telling EZID again later", w.RETRYING),
        ("Recording", "inventory: 502; adding again later", w.RETRYING),
        # A marker in another step's message is that step's success, not a wait here.
        ("Storing", "waiting for disk space: old news", w.WORKER),
        ("Pending", "again later", w.WORKER),
        ("Pending", "", w.WORKER),
    ],
)
def test_a_steps_own_wait_is_read_from_its_message(status, message, expected):
    assert code(job(status, message=message)) == expected


def test_disk_space_says_how_many_bytes_must_free_up():
    disk = w.Disk(total=10_000, used=7_500, threshold=80)
    item = job("Provisioning", message="waiting for disk space: ...", space_needed=1_000)
    found = w.decide(item, w.QueueFacts(disk=disk))
    assert found.ends == "when 500 bytes free up on the working disk"
    assert w.decide(item, w.QueueFacts()).ends == "when the working disk has room for it"


def test_a_storage_lock_names_its_holder_to_staff_only():
    item = job("Storing", message=f"{ARK} is being stored by another job")
    found = w.decide(item, w.QueueFacts(storage_locks={lock_name(ARK): "jid0000000001"}))
    assert found.words == f"{ARK} is being stored by job jid0000000001"
    assert "jid0000000001" not in found.as_json(public=True)["words"]
    # The lock released since: the step's own words.
    assert w.decide(item, w.QueueFacts()).words == item.message


def test_the_rules_are_tried_in_order():
    everything = w.QueueFacts(pause=PAUSE, holds={"demo": HOLD}, breakers=(EZID,))
    assert w.decide(job("Pending"), everything).code == w.QUEUE_PAUSED
    assert w.decide(job("Held"), everything).code == w.COLLECTION_HELD
    assert w.RULE_ORDER.index(w.QUEUE_PAUSED) < w.RULE_ORDER.index(w.DEPENDENCY_DOWN)
    assert set(w.RULE_ORDER) | {w.MAINTENANCE_WINDOW} == set(w.REASONS)


def test_the_estimate_follows_the_measured_pace():
    rate = Rate(per_second=0.5, seconds_after={"Pending": 30.0})
    order = estimate(11, 10, 5000, "Pending", rate, NOW)
    assert order.starts_at == NOW + timedelta(seconds=20)
    assert order.finishes_at == NOW + timedelta(seconds=50)
    body = w.Waiting(w.WORKER, "waiting for a worker", "", order=order).as_json(public=True)
    assert body["position"] == 11 and body["jobs_ahead"] == 10 and body["bytes_ahead"] == 5000
    assert body["starts_at"] == "2026-11-27T10:00:20Z"
    # Nothing finished in the last hour: no estimate, the place still given.
    none = estimate(3, 2, 0, "Pending", Rate(None), NOW)
    assert (none.position, none.starts_at, none.finishes_at) == (3, None, None)
