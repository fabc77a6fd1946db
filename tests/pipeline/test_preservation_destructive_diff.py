"""The review's diff as plain arithmetic (``merritt_queue.services.updatediff``): the same
changes storage makes, the share replaced, why it waits, and the lists capped so the store
node stays small whatever the object's size."""

from __future__ import annotations

import json

from merritt_queue.services import updatediff
from merritt_queue.services.versions import StoredFile


def f(name: str, size: int, digest: str = "") -> StoredFile:
    return StoredFile(name, size, {"sha256": digest or f"{name}-{size}"})


def test_an_update_carries_replaces_adds_and_deletes_as_storage_does():
    current = [f("a", 10), f("b", 20), f("c", 70)]
    diff = updatediff.diff(current, [f("c", 70, "new"), f("d", 5)], "update", ["a"], 3)
    assert diff["version"] == 3 and diff["current_bytes"] == 100
    assert diff["totals"] == {
        "added": {"files": 1, "bytes": 5},
        "replaced": {"files": 1, "bytes": 70},
        "carried": {"files": 1, "bytes": 20},
        "deleted": {"files": 1, "bytes": 10},
    }
    assert diff["replaced_share"] == 0.7
    assert diff["files"]["deleted"] == [["a", 10, None]]
    assert diff["files"]["replaced"] == [["c", 70, 70]]
    why = updatediff.why_destructive(diff, 0.5)
    assert why == [
        "it deletes 1 file(s), 10 bytes",
        "it replaces 70% of the object's bytes (more than 50%)",
    ]
    assert updatediff.why_destructive(diff, 0.8) == ["it deletes 1 file(s), 10 bytes"]


def test_an_add_of_an_existing_object_deletes_what_it_does_not_submit_again():
    diff = updatediff.diff([f("a", 10), f("b", 20)], [f("b", 20)], "add", [], 1)
    assert diff["totals"]["deleted"] == {"files": 1, "bytes": 10}
    assert diff["totals"]["carried"]["files"] == 1


def test_nothing_destructive_waits_for_nobody():
    diff = updatediff.diff([f("a", 10)], [f("b", 1)], "update", [], 1)
    assert updatediff.why_destructive(diff, 0.5) == []


def test_the_lists_are_capped_and_the_totals_count_every_file():
    current = [f(f"producer/{'x' * 200}-{i}", 1) for i in range(1000)]
    diff = updatediff.diff(current, [], "update", [c.name for c in current[:300]], 1)
    files = diff["files"]
    assert diff["totals"]["deleted"]["files"] == 300 and diff["totals"]["carried"]["files"] == 700
    assert len(files["deleted"]) <= updatediff.MAX_NAMES
    kept = sum(len(files[c]) for c in ("added", "replaced", "carried", "deleted"))
    assert files["left_out"] == 1000 - kept
    assert len(json.dumps(diff)) < updatediff.MAX_LIST_BYTES + 2048
