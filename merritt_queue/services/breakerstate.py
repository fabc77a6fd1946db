"""One dependency's circuit breaker as ZooKeeper keeps it (``breakers``): the record, how
people read it, and how a failure or a closing changes it. Pure: no client, no I/O.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from urllib.parse import quote

ROOT = "/merritt-queue/breakers"
CLOSED, OPEN = "closed", "open"
# The names the dashboard lists even before they first fail: the site's own services.
KNOWN = ("ezid", "storage", "inventory", "smtp")
# A job refused while another worker's probe is under way waits this long, not a whole
# cool-off: the probe usually answers in seconds, and a closed breaker should let it go on.
PROBE_WAIT_SECONDS = 10.0
_LABELS = {"ezid": "EZID", "storage": "storage", "inventory": "inventory", "smtp": "SMTP"}


@dataclass(frozen=True)
class Policy:
    """How many transient failures in a row open a breaker (0: never), and how long it
    stays open before a probe."""

    threshold: int = 5
    cool_off: float = 300.0


DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class BreakerState:
    """One dependency's breaker as stored (epoch seconds; ``None``: not set)."""

    name: str
    state: str = CLOSED
    since: float | None = None  # opened at, or closed at
    failures: int = 0  # transient failures in a row
    failures_total: int = 0  # every transient failure counted, for /metrics
    next_probe: float | None = None  # None while closed, and when opened by hand
    probe_at: float | None = None  # when the current probe was let through
    last_error: str = ""
    by: str = ""  # who opened or closed it by hand
    reason: str = ""
    version: int = -1  # the node's version read; -1: no node yet

    @property
    def is_open(self) -> bool:
        return self.state == OPEN

    @property
    def by_hand(self) -> bool:
        """Opened by hand: never probed, closed only by hand."""
        return self.is_open and bool(self.by)

    @property
    def label(self) -> str:
        return label(self.name)

    def wait(self, now: float) -> float:
        """How long a job refused now should wait before its step is tried again."""
        if self.probe_at is not None and self.next_probe is not None and now < self.next_probe:
            return min(PROBE_WAIT_SECONDS, self.next_probe - now)
        if self.next_probe is None:  # opened by hand: asked again now and then
            return PROBE_WAIT_SECONDS * 6
        return max(1.0, self.next_probe - now)

    def explain(self) -> str:
        """What a waiting job's message says: "EZID unreachable since 10:02:07 UTC, next
        probe 10:07:07 UTC". Not the last error: another job's call met it, and it may name
        that job's URL or ARK, which this job's depositor must not read (the dashboard
        shows it to staff)."""
        since = f" since {clock(self.since)}" if self.since else ""
        if self.by_hand:
            why = f"{self.label} closed off by hand{since} by {self.by}"
            return f"{why}: {self.reason}" if self.reason else why
        probe = f", next probe {clock(self.next_probe)}" if self.next_probe else ""
        return f"{self.label} unreachable{since}{probe}"


def label(name: str) -> str:
    """A dependency as people name it: ``EZID``, ``webhook host h``, ``content host h``."""
    kind, _, host = name.partition(":")
    if host:
        return f"{kind} host {host}"
    return _LABELS.get(name, name)


def clock(epoch: float | None) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(epoch)) if epoch else ""


def node_of(name: str) -> str:
    return f"{ROOT}/{quote(name, safe='')}"


def closed(s: BreakerState, now: float) -> BreakerState:
    """Closed, nothing counted against it; since ``now`` if it was open."""
    return replace(
        s,
        state=CLOSED,
        since=now if s.is_open else s.since,
        failures=0,
        next_probe=None,
        probe_at=None,
        by="",
        reason="",
    )


def counted(s: BreakerState, error: str, policy: Policy, now: float) -> BreakerState:
    """One transient failure more: the breaker opens at the threshold, and a failed probe
    keeps it open another cool-off. One opened by hand stays as it is."""
    s = replace(s, failures=s.failures + 1, failures_total=s.failures_total + 1)
    s = replace(s, last_error=error[:500])
    if s.is_open:
        if s.by_hand:
            return s
        return replace(s, next_probe=now + policy.cool_off, probe_at=None)
    if policy.threshold > 0 and s.failures >= policy.threshold:
        return replace(s, state=OPEN, since=now, next_probe=now + policy.cool_off, probe_at=None)
    return s


def forgettable(s: BreakerState) -> bool:
    """A host's breaker back to nothing to remember is removed, not kept closed: depositors
    name hosts without end, and the tree, the panel and /metrics would keep them all."""
    return ":" in s.name and not s.is_open and s.failures == 0 and not s.by


def decode(name: str, data: bytes, version: int) -> BreakerState:
    try:
        fields = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        fields = {}  # damaged: read as closed, and the next write replaces it
    known = {k: v for k, v in fields.items() if k in BreakerState.__dataclass_fields__}
    known.pop("name", None)
    known.pop("version", None)
    return BreakerState(name, version=version, **known)


def encode(s: BreakerState) -> bytes:
    return json.dumps({k: v for k, v in asdict(s).items() if k not in ("name", "version")}).encode()
