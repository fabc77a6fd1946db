"""A circuit breaker per outside dependency, shared by every worker on every machine.

A dependency (``ezid``, ``storage``, ``inventory``, ``smtp``, ``webhook:<host>``,
``content:<host>``) that fails with transient errors (connection refused, timeouts, 5xx:
a ``ServiceError`` that is ``retryable``) ``threshold`` times in a row *opens* its breaker:
until ``cool_off`` seconds have passed, no step calls it, and the jobs that need it wait in
their state instead of failing. Then one call is let through (the *probe*): its success
closes the breaker, and the waiting jobs go on by themselves; its failure keeps it open for
another cool-off. An answer that is not transient (a 404, a refusal) is the dependency
answering, so it counts as a success: a depositor's missing file never opens a breaker.

An operator may open a breaker by hand (EZID's announced downtime): it is then never
probed, and stays open until closed by hand.

The state is kept in ZooKeeper, one persistent node per dependency under
``/merritt-queue/breakers`` (a node of this project's own, which MerrittZK never reads), so
that a breaker opened by one worker holds every worker, survives a flush of Redis and a
restart, and each change is a version-checked write: two workers that fail at once count
two failures, and only one of them takes the probe.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from .breakerwatch import watched

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


@dataclass(frozen=True)
class Admission:
    """Whether a call may go to the dependency; ``probe`` when it is the one let through."""

    allowed: bool
    state: BreakerState
    probe: bool = False


class Breakers:
    """The breakers of one ZooKeeper ensemble. ``client_of`` gives the process's current
    client (a worker's session may be rebuilt); ``clock`` is the time in epoch seconds."""

    def __init__(
        self,
        client_of: Callable[[], KazooClient],
        policy: Policy = Policy(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client_of = client_of
        self.policy = policy
        self.clock = clock

    @property
    def enabled(self) -> bool:
        return self.policy.threshold > 0

    # --- reading --------------------------------------------------------------------

    def read(self, name: str) -> BreakerState:
        try:
            data, stat = self.client_of().get(node_of(name))
        except NoNodeError:
            return BreakerState(name)
        return _decode(name, data, stat.version)

    def read_watched(self, name: str) -> BreakerState:
        """``read``, answered from what this client last read while no write came since
        (``breakerwatch``): what every guarded call asks."""
        data, version = watched(self.client_of()).get(node_of(name))
        return BreakerState(name) if data is None else _decode(name, data, version)

    def snapshot(self) -> list[BreakerState]:
        """Every breaker: the site's own services, then each host one was kept for."""
        client = self.client_of()
        try:
            names = sorted(unquote(n) for n in client.get_children(ROOT))
        except NoNodeError:
            names = []
        ordered = [*KNOWN, *(n for n in names if n not in KNOWN)]
        return [self.read(n) if n in names else BreakerState(n) for n in ordered]

    # --- a call through the breaker ---------------------------------------------------

    def admit(self, name: str) -> Admission:
        """Whether a call to ``name`` may go now. An open breaker past its probe time lets
        exactly one caller through (a version-checked write moves the probe time on)."""
        state = self.read_watched(name)
        if not state.is_open or not self.enabled:
            return Admission(True, state)
        now = self.clock()
        if state.next_probe is None or now < state.next_probe:
            return Admission(False, state)
        probing = replace(state, probe_at=now, next_probe=now + self.policy.cool_off)
        try:
            written = self._write(probing)
        except (BadVersionError, NodeExistsError):
            return Admission(False, self.read(name))  # another worker took the probe
        return Admission(True, written, probe=True)

    def succeeded(self, admitted: Admission) -> BreakerState:
        """The dependency answered: its failures in a row are over, an open breaker closes.
        Nothing is written when there was nothing to forget (the usual case)."""
        state = admitted.state
        if state.failures == 0 and not state.is_open:
            return state
        if state.is_open and not admitted.probe:  # opened meanwhile (by hand): leave it
            return state
        return self._change(state.name, lambda s: s if s.by_hand else self._closed(s))

    def failed(self, name: str, error: str) -> BreakerState:
        """A transient failure of ``name``: counted; the breaker opens at the threshold, and
        a failed probe keeps it open for another cool-off."""
        return self._change(name, lambda s: self._counted(s, error))

    def open_by_hand(self, name: str, by: str, reason: str) -> BreakerState:
        now = self.clock()
        return self._change(
            name,
            lambda s: replace(
                s, state=OPEN, since=now, next_probe=None, probe_at=None, by=by, reason=reason
            ),
        )

    def close_by_hand(self, name: str, by: str, reason: str) -> BreakerState:
        return self._change(name, lambda s: replace(self._closed(s), by=by, reason=reason))

    # --- transitions --------------------------------------------------------------------

    def _closed(self, s: BreakerState) -> BreakerState:
        since = self.clock() if s.is_open else s.since
        return replace(
            s,
            state=CLOSED,
            since=since,
            failures=0,
            next_probe=None,
            probe_at=None,
            by="",
            reason="",
        )

    def _counted(self, s: BreakerState, error: str) -> BreakerState:
        now = self.clock()
        s = replace(s, failures=s.failures + 1, failures_total=s.failures_total + 1)
        s = replace(s, last_error=error[:500])
        if s.is_open:
            if s.by_hand:
                return s
            return replace(s, next_probe=now + self.policy.cool_off, probe_at=None)
        if self.enabled and s.failures >= self.policy.threshold:
            return replace(
                s, state=OPEN, since=now, next_probe=now + self.policy.cool_off, probe_at=None
            )
        return s

    def _change(self, name: str, change: Callable[[BreakerState], BreakerState]) -> BreakerState:
        """Apply ``change`` to the breaker as stored, again on a fresh read whenever another
        worker wrote it in between."""
        while True:
            try:
                return self._write(change(self.read(name)))
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue

    def _write(self, s: BreakerState) -> BreakerState:
        client = self.client_of()
        try:
            return self._write_node(client, s)
        finally:
            watched(client).forget(node_of(s.name))

    def _write_node(self, client: KazooClient, s: BreakerState) -> BreakerState:
        if _forgettable(s) and s.version >= 0:
            client.delete(node_of(s.name), version=s.version)
            return replace(s, version=-1)
        data = json.dumps({k: v for k, v in asdict(s).items() if k not in ("name", "version")})
        if s.version < 0:
            client.create(node_of(s.name), data.encode(), makepath=True)
            return replace(s, version=0)
        stat = client.set(node_of(s.name), data.encode(), version=s.version)
        return replace(s, version=stat.version)


def _forgettable(s: BreakerState) -> bool:
    """A host's breaker back to nothing to remember is removed, not kept closed: depositors
    name hosts without end, and the tree, the panel and /metrics would keep them all."""
    return ":" in s.name and not s.is_open and s.failures == 0 and not s.by


def _decode(name: str, data: bytes, version: int) -> BreakerState:
    try:
        fields = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        fields = {}  # damaged: read as closed, and the next write replaces it
    known = {k: v for k, v in fields.items() if k in BreakerState.__dataclass_fields__}
    known.pop("name", None)
    known.pop("version", None)
    return BreakerState(name, version=version, **known)


def snapshot(client: KazooClient, policy: Policy = Policy()) -> list[BreakerState]:
    """Every breaker as it stands: what the dashboard, /metrics and the status pages show."""
    return Breakers(lambda: client, policy).snapshot()
