"""The dispatcher's periodic hook: each part runs whatever the other did."""

from __future__ import annotations

import pytest

from merritt_queue.project import periodic


@pytest.fixture
def parts(monkeypatch, settings):
    settings.MQ_SWEEP_SECONDS = 10
    calls: list[str] = []
    behaviour = {
        "windows": lambda store: 3.0,
        "runs": lambda store: None,
        "notifications": lambda: 0,
        "retention": lambda store: None,
    }
    names = {
        periodic.WINDOWS: "windows",
        periodic.RESUME_RUNS: "runs",
        periodic.RETENTION: "retention",
    }

    def fake_import(path):
        name = names.get(path, "notifications")

        def part(*args):
            calls.append(name)
            return behaviour[name](*args)

        return part

    monkeypatch.setattr(periodic, "import_string", fake_import)
    monkeypatch.setattr(periodic, "close_old_connections", lambda: None)
    return calls, behaviour


def test_both_parts_run_and_the_nearest_window_boundary_sets_the_next_tick(parts):
    calls, _ = parts
    assert periodic.ticker(store=None)() == 3.0
    assert calls == ["windows", "runs", "retention", "notifications"]


def test_a_failing_part_neither_stops_the_other_nor_the_dispatcher(parts):
    calls, behaviour = parts

    def broken(*args):
        raise RuntimeError("database away")

    behaviour["windows"] = broken
    assert periodic.ticker(store=None)() == 5.0  # tried again soon
    assert calls == ["windows", "runs", "retention", "notifications"]
    behaviour["windows"], behaviour["notifications"] = (lambda store: None), broken
    assert periodic.ticker(store=None)() == 10.0  # at the sweep's own pace


def test_a_resume_run_due_sooner_sets_the_next_tick(parts):
    calls, behaviour = parts
    behaviour["runs"] = lambda store: 1.5
    assert periodic.ticker(store=None)() == 1.5
    behaviour["runs"] = lambda store: 1 / 0
    assert periodic.ticker(store=None)() == 3.0  # the windows' boundary; runs tried again
    assert calls.count("notifications") == 2


def test_retention_due_sooner_sets_the_next_tick_and_its_fault_stops_nothing(parts):
    calls, behaviour = parts
    behaviour["retention"] = lambda store: 0.0  # a pass under way: its next slice at once
    assert periodic.ticker(store=None)() == 0.0
    behaviour["retention"] = lambda store: 1 / 0
    assert periodic.ticker(store=None)() == 3.0
    assert calls.count("notifications") == 2
