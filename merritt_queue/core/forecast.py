"""Capacity ahead: when the working disk crosses its threshold, how long the backlog takes,
and what releasing a held collection adds, each at the rate of the last hour.

Plain arithmetic over figures read elsewhere (the mirror's last hour, the disk's own
figures), so that the dashboard, the release's confirmation page and /metrics say the same.
A rate of nothing is no forecast: the pages say "not at the current rate", never a
division by zero or an infinity.
"""

from __future__ import annotations

from dataclasses import dataclass

HOUR = 3600.0


@dataclass(frozen=True)
class DiskForecast:
    used: int  # bytes the workers cannot write (in use, reserved for root, over a quota)
    total: int
    threshold: float  # percent: MQ_DISK_THRESHOLD, what Provisioning waits below
    bytes_in: int  # bytes the jobs that entered Downloading in the last hour reserved
    bytes_out: int  # bytes of the jobs that completed in the last hour (their folder goes)

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.total if self.total else 0.0

    @property
    def room(self) -> int:
        """Bytes left under the threshold (negative: over it already)."""
        return int(self.total * self.threshold / 100.0) - self.used

    @property
    def net_per_hour(self) -> int:
        return self.bytes_in - self.bytes_out

    @property
    def seconds(self) -> float | None:
        """Seconds until the threshold at the last hour's net rate: 0 when over it already,
        None when the disk is not filling."""
        if self.room <= 0:
            return 0.0
        if self.net_per_hour <= 0:
            return None
        return HOUR * self.room / self.net_per_hour


def backlog_seconds(jobs: int, finished_per_hour: int) -> float | None:
    """Seconds to finish ``jobs`` at the last hour's rate: 0 for none, None at no rate."""
    if jobs <= 0:
        return 0.0
    if finished_per_hour <= 0:
        return None
    return HOUR * jobs / finished_per_hour


@dataclass(frozen=True)
class ReleasePreview:
    """What releasing a held collection adds to the work ahead."""

    collection: str
    jobs: int  # its Held jobs the release moves back to Pending
    batches: int  # its Held batches: their jobs are not known until they are read
    bytes_known: int  # the sizes Estimating already found
    unsized: int  # jobs whose size is not known yet (caught before Estimating)
    typical_size: int  # the collection's recent finished jobs' mean size, 0 if none
    finished_per_hour: int

    @property
    def bytes(self) -> int:
        """Known sizes, and the collection's typical size for each job not yet estimated."""
        return self.bytes_known + self.unsized * self.typical_size

    @property
    def estimated(self) -> bool:
        """Whether the bytes lean on the typical size for some jobs."""
        return self.unsized > 0

    @property
    def seconds(self) -> float | None:
        return backlog_seconds(self.jobs, self.finished_per_hour)
