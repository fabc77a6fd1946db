"""CPU seconds of a run: each queue process's, the throw-away services', the bench's own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol


class Processes(Protocol):
    """What the meter reads of a run's processes (``bench.common.Processes``, which imports
    this module): each one's CPU seconds so far."""

    def cpu(self) -> dict[str, float]: ...


class CpuMeter:
    """CPU seconds from its creation on: the services', this process's and its children's."""

    def __init__(self) -> None:
        self._start({})

    def start_processes(self, procs: Processes) -> None:
        """Count every second from now on (the queue processes' start-up left out)."""
        self._start(procs.cpu())

    def _start(self, processes: dict[str, float]) -> None:
        self.processes = processes
        self.services = service_cpu()
        self.own = own_cpu()

    def used(self, procs: Processes) -> dict[str, float]:
        """Each queue process's seconds (since ``start_processes``, else over its life), the
        services', ``bench`` (this process: content server, poller) and ``submit`` (its
        waited-for children)."""
        own = own_cpu()
        return (
            {
                name: round(seconds - self.processes.get(name, 0.0), 2)
                for name, seconds in procs.cpu().items()
            }
            | {
                name: round(after - self.services[name], 2)
                for name, after in service_cpu().items()
                if name in self.services
            }
            | {"bench": round(own[0] - self.own[0], 2), "submit": round(own[1] - self.own[1], 2)}
        )


def queue_cpu_seconds(cpu: dict[str, float]) -> float:
    """The CPU seconds of the queue and its services in ``CpuMeter.used``'s figures: every
    process but the bench's own (its content server stands for depositors' hosts, its poller
    for nobody)."""
    return sum(seconds for name, seconds in cpu.items() if name != "bench")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process, from ``/proc/<pid>/stat`` (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def service_cpu() -> dict[str, float]:
    """CPU seconds of the throw-away ZooKeeper and Redis of ``with-test-services``, if known."""
    root = os.environ.get("MQ_TEST_TMP")
    if not root:
        return {}
    used = {}
    for name, pidfile in (("zookeeper", "zookeeper/zookeeper.pid"), ("redis", "redis/redis.pid")):
        try:
            seconds = cpu_seconds(int((Path(root) / pidfile).read_text().strip()))
        except (OSError, ValueError):
            continue
        if seconds is not None:
            used[name] = seconds
    return used


def own_cpu() -> tuple[float, float]:
    """CPU seconds of this process (content server, poller) and of its waited-for children."""
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system
