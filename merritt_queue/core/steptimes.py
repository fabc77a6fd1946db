"""How long a job's step takes for its size, learned from the steps that finished, and
whether a job still in a step has run far past that.

A step's time is the time from the status version that entered the state to the one that
left it for the next step, as the record of every status write gives it (docs/history.md):
waiting in RQ, retries that only wrote a note and the handler's work all count, because
that is what a reader of the job's page waits for.

The model of a state is a linear quantile regression of the step's seconds on the job's
bytes at a high quantile ``q``: the line ``overhead + per_byte * size`` that the share
``q`` of the finished steps stay under, its fixed overhead and per-byte time both learned.
For a given slope the best overhead is the quantile of what the slope leaves; the pinball
loss is convex in the slope, so a golden-section search over it finds the line without a
solver.

A state with fewer samples than asked for has no model: its jobs are never flagged, and
the pages say that history is too short. A job's size is what Estimating found, so
Estimating itself is judged by its overhead alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .states import JOB_STEPS, JobStatus

# The states a job's size is known in (space_needed is written as Estimating succeeds).
SIZED_STATES = frozenset(JOB_STEPS) - {JobStatus.ESTIMATING}


@dataclass(frozen=True)
class StepSample:
    seconds: float
    size: int  # bytes: the job's space_needed


@dataclass(frozen=True)
class StepModel:
    state: str
    samples: int
    needed: int  # samples wanted before a bound is trusted
    overhead: float = 0.0  # seconds
    per_byte: float = 0.0  # seconds per byte

    @property
    def ready(self) -> bool:
        return self.samples > 0 and self.samples >= self.needed

    def bound(self, size: int) -> float:
        """Seconds within which the step usually ends for a job of ``size`` bytes."""
        sized = size if self.state in SIZED_STATES else 0
        return self.overhead + self.per_byte * max(0, sized)


@dataclass(frozen=True)
class Verdict:
    """A job in a step, judged: ``stalled`` only when the model is ready and the job is past
    both the model's bound for its size and the floor."""

    state: str
    elapsed: float  # seconds in the state so far
    usual: float | None  # the model's bound for its size; None without a model
    limit: float | None  # past this it is flagged: the bound, or the floor if longer
    stalled: bool
    samples: int
    needed: int

    @property
    def known(self) -> bool:
        return self.usual is not None


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values``, interpolated between the two nearest ranks."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def pinball(residuals: Iterable[float], q: float) -> float:
    """The quantile loss of a line's residuals (observed minus bound)."""
    return sum(q * r if r >= 0 else (q - 1) * r for r in residuals)


# Golden-section steps over the slope: each narrows the range by a third or so, and this
# many leave a range far narrower than any difference a page could show.
SEARCH_STEPS = 50
GOLDEN = (5**0.5 - 1) / 2


def fit(state: str, samples: Iterable[StepSample], *, needed: int, q: float = 0.99) -> StepModel:
    """The model of ``state`` from its finished steps (see the module's docstring)."""
    sized = state in SIZED_STATES
    found = [
        StepSample(max(0.0, s.seconds), s.size if sized else 0) for s in samples if s.seconds >= 0
    ]
    if len(found) < needed or not found:
        return StepModel(state, len(found), needed)

    def overhead(slope: float) -> float:
        return quantile([s.seconds - slope * s.size for s in found], q)

    def loss(slope: float) -> float:
        a = overhead(slope)
        return pinball((s.seconds - a - slope * s.size for s in found), q)

    low, high = 0.0, max((s.seconds / s.size for s in found if s.size > 0), default=0.0)
    left, right = high - GOLDEN * (high - low), low + GOLDEN * (high - low)
    at_left, at_right = loss(left), loss(right)
    for _ in range(SEARCH_STEPS if high > 0 else 0):
        # Each step keeps one of the two points, so it costs one loss.
        if at_left <= at_right:
            high, right, at_right = right, left, at_left
            left = high - GOLDEN * (high - low)
            at_left = loss(left)
        else:
            low, left, at_left = left, right, at_right
            right = low + GOLDEN * (high - low)
            at_right = loss(right)
    slope = (low + high) / 2
    return StepModel(state, len(found), needed, max(0.0, overhead(slope)), slope)


def judge(model: StepModel, elapsed: float, size: int, *, floor: float) -> Verdict:
    """Whether a job ``elapsed`` seconds into ``model``'s state has run far past its time."""
    if not model.ready:
        return Verdict(model.state, elapsed, None, None, False, model.samples, model.needed)
    usual = model.bound(size)
    limit = max(floor, usual)
    return Verdict(model.state, elapsed, usual, limit, elapsed > limit, model.samples, model.needed)
