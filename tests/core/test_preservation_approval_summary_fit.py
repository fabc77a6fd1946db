"""A big batch's pre-flight summary is shrunk to fit its ``approval`` node, never dropped
whole: the lists lose entries (said how many), the figures and ``counts`` stay."""

from __future__ import annotations

from merritt_queue.core import approval as ap
from merritt_queue.core import tree as t


def big_summary(n: int = 200) -> dict:
    return {
        "version": 1,
        "rows": 10_000,
        "jobs": 10_000,
        "declared_bytes": 123_456_789,
        "measured_bytes": 5_000,
        "measured_rows": 5,
        "sample": [
            {
                "line": i,
                "url": "https://example.org/" + "u" * 190,
                "status": 200,
                "bytes": 1000,
                "ms": 3,
                "error": None,
            }
            for i in range(50)
        ],
        "duplicate_local_ids": [
            {"local_id": f"lid-{i}", "lines": list(range(i, i + 500))} for i in range(n)
        ],
        "updates": [
            {"line": i, "local_id": f"lid-{i}", "ark": f"ark:/99999/fk4{i}", "title": "T" * 2000}
            for i in range(n)
        ],
        "in_flight": [
            {
                "line": i,
                "local_id": f"lid-{i}",
                "ark": f"ark:/99999/fk4{i}",
                "jid": f"jid{i:010d}",
                "bid": "bid0000000001",
                "status": "Pending",
            }
            for i in range(n)
        ],
        "counts": {"duplicate_local_ids": 900, "updates": 5_000, "in_flight": n},
        "predicted_finish": {"seconds": 60, "basis": "x"},
        "problems": 0,
    }


def test_a_big_summary_keeps_its_figures_and_says_what_it_left_out():
    summary = big_summary()
    kept = ap.node("slow", summary)["summary"]
    assert "unavailable" not in kept
    assert len(t.encode_json(kept)) <= ap.MAX_SUMMARY_BYTES
    for key in ("rows", "jobs", "declared_bytes", "measured_bytes", "counts", "predicted_finish"):
        assert kept[key] == summary[key]
    left = kept["left_out"]
    for key in ("duplicate_local_ids", "updates", "in_flight"):
        assert kept[key], key  # some entries stay
        assert left[key] == len(summary[key]) - len(kept[key])
    assert all(len(u["title"]) <= ap.summaryfit.TEXT_CUT for u in kept["updates"])
    assert all(len(d["lines"]) <= ap.summaryfit.LINES_CUT for d in kept["duplicate_local_ids"])
    assert kept["duplicate_local_ids"][0]["more_lines"] == 500 - ap.summaryfit.LINES_CUT


def test_a_summary_that_fits_is_kept_as_it_is():
    summary = big_summary(2)
    summary["updates"][0]["title"] = "short"
    summary["duplicate_local_ids"] = []
    assert ap.node("slow", summary)["summary"] == summary


def test_only_a_summary_that_cannot_be_shrunk_is_unavailable():
    summary = {"version": 1, "problems": 0, "basis": "x" * (ap.MAX_SUMMARY_BYTES + 1)}
    kept = ap.node("slow", summary)["summary"]
    assert set(kept) == {"unavailable"} and "larger than" in kept["unavailable"]
