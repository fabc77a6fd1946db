"""The step-time model and the capacity forecasts (merritt_queue.core.steptimes, .forecast):
plain arithmetic, checked on histories whose step times are known."""

from __future__ import annotations

import random

from merritt_queue.core.forecast import DiskForecast, ReleasePreview, backlog_seconds
from merritt_queue.core.steptimes import StepSample, fit, judge, quantile

MB = 1_000_000


def downloads(n: int = 200, seed: int = 7) -> list[StepSample]:
    """Downloads of 1 MB to 10 GB taking 30 s plus 0.5 s a MB, give or take a tenth."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        size = rnd.randint(1, 10_000) * MB
        out.append(StepSample((30 + 0.5 * size / MB) * rnd.uniform(0.9, 1.1), size))
    return out


def test_quantile_interpolates_between_ranks():
    assert quantile([1, 2, 3, 4, 5], 0.5) == 3
    assert quantile([10, 0], 0.25) == 2.5
    assert quantile([], 0.99) == 0.0


def test_the_model_bounds_a_step_by_its_size_from_a_known_history():
    model = fit("Downloading", downloads(), needed=30)
    assert model.ready and model.samples == 200
    # The bound sits just above the slowest of the history at each size.
    assert 0 <= model.overhead <= 100
    assert 0.5 * 1.1 / MB * 0.95 <= model.per_byte <= 0.5 * 1.2 / MB
    for sample in downloads(seed=8):
        assert model.bound(sample.size) >= sample.seconds * 0.9


def test_a_small_job_far_past_its_time_is_flagged_and_a_large_job_within_its_time_is_not():
    model = fit("Downloading", downloads(), needed=30)
    small = judge(model, elapsed=3600, size=10 * MB, floor=600)
    large = judge(model, elapsed=3600, size=8_000 * MB, floor=600)
    assert small.stalled and small.usual is not None and small.usual < 60
    assert small.limit == 600  # the floor: a tiny step is not flagged at once
    assert not large.stalled and large.usual is not None and large.usual > 3600


def test_the_floor_keeps_tiny_steps_from_being_flagged():
    model = fit("Notify", [StepSample(1.0, 5) for _ in range(50)], needed=30)
    assert model.bound(5) < 2
    assert not judge(model, elapsed=300, size=5, floor=600).stalled
    assert judge(model, elapsed=601, size=5, floor=600).stalled


def test_too_little_history_flags_nothing_and_says_how_much_there_is():
    model = fit("Storing", downloads(n=12), needed=30)
    assert not model.ready
    verdict = judge(model, elapsed=10**6, size=1, floor=600)
    assert not verdict.stalled and not verdict.known
    assert (verdict.samples, verdict.needed) == (12, 30)


def test_estimating_is_judged_by_its_overhead_alone():
    # Its size is what it finds: a job in it has none yet.
    model = fit("Estimating", [StepSample(2.0, 10**12) for _ in range(40)], needed=30)
    assert model.per_byte == 0 and model.bound(10**12) == 2.0


def test_the_disk_forecast_from_known_figures():
    # 1 TB disk, 700 GB used, threshold 80 %: 100 GB of room; 30 GB in and 10 GB out an hour.
    disk = DiskForecast(700 * 10**9, 10**12, 80, 30 * 10**9, 10 * 10**9)
    assert disk.percent == 70.0 and disk.room == 100 * 10**9
    assert disk.seconds == 5 * 3600
    assert DiskForecast(700, 1000, 80, 10, 10).seconds is None  # not filling
    assert DiskForecast(900, 1000, 80, 0, 10).seconds == 0  # over it already


def test_the_backlog_and_a_release_at_the_last_hours_rate():
    assert backlog_seconds(1200, 400) == 3 * 3600
    assert backlog_seconds(0, 0) == 0 and backlog_seconds(5, 0) is None
    preview = ReleasePreview("demo", 1204, 1, 4 * 10**9, 1200, 300 * 10**6, 400)
    assert preview.bytes == 364 * 10**9 and preview.estimated
    assert preview.seconds == 3600 * 1204 / 400


def test_no_history_is_never_ready_whatever_is_asked():
    assert not fit("Storing", [], needed=0).ready
