"""Where a resume run stands, counted from its items: what its page shows and what its
self-stop judges (``steering.runs.driver``), from the one count."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Min

from steering.models import ResumeRun, ResumeRunItem

I = ResumeRunItem  # noqa: E741 (the item's states, read as I.WAITING)


@dataclass(frozen=True)
class Progress:
    total: int
    left: int  # not yet taken (waiting, or being resumed)
    resumed: int  # resumed and not finished yet: in flight
    completed: int
    failed_again: int
    skipped: int  # moved since the confirmation, quarantined, or refused
    deleted: int

    @property
    def done(self) -> int:
        """Taken and settled: what the progress bar counts."""
        return self.total - self.left - self.resumed

    @property
    def settled(self) -> int:
        """Resumed jobs that finished, one way or the other: the self-stop's sample."""
        return self.completed + self.failed_again + self.deleted

    @property
    def percent(self) -> int:
        return 100 if not self.total else self.done * 100 // self.total


def progress(run: ResumeRun) -> Progress:
    rows = run.items.order_by().values("state").annotate(n=Count("id"))
    n = {r["state"]: r["n"] for r in rows}
    return Progress(
        total=sum(n.values()),
        left=n.get(I.WAITING, 0) + n.get(I.SENDING, 0),
        resumed=n.get(I.RESUMED, 0),
        completed=n.get(I.COMPLETED, 0),
        failed_again=n.get(I.FAILED_AGAIN, 0),
        skipped=n.get(I.SKIPPED, 0) + n.get(I.NOT_RESUMED, 0),
        deleted=n.get(I.DELETED, 0),
    )


@dataclass(frozen=True)
class Cause:
    count: int
    cause: str
    example: str


def top_cause(run: ResumeRun) -> Cause | None:
    """The cause most of the run's jobs failed again with."""
    row = (
        run.items.filter(state=I.FAILED_AGAIN)
        .order_by()
        .values("cause")
        .annotate(n=Count("id"), example=Min("message"))
        .order_by("-n", "cause")
        .first()
    )
    return Cause(row["n"], row["cause"], row["example"]) if row else None


def stop_reason(run: ResumeRun, p: Progress) -> str:
    """Why the run must stop now ("" when it may go on): more than its share of the resumed
    jobs that finished failed again with one cause, once enough of them finished."""
    if p.settled < max(run.stop_min, 1):
        return ""
    top = top_cause(run)
    if top is None or top.count <= run.stop_share * p.settled:
        return ""
    example = " ".join(top.example.split())[:200]
    return f"stopped: {top.count} of {p.settled} resumed jobs failed again with '{example}'"
