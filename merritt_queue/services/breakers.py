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

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import unquote

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from .breakerstate import (  # noqa: F401 (what the callers import from here)
    CLOSED,
    DEFAULT_POLICY,
    KNOWN,
    OPEN,
    ROOT,
    BreakerState,
    Policy,
    closed,
    counted,
    decode,
    encode,
    forgettable,
    label,
    node_of,
)
from .breakerwatch import watched


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
        policy: Policy = DEFAULT_POLICY,
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
        return decode(name, data, stat.version)

    def read_watched(self, name: str) -> BreakerState:
        """``read``, answered from what this client last read while no write came since
        (``breakerwatch``): what every guarded call asks."""
        data, version = watched(self.client_of()).get(node_of(name))
        return BreakerState(name) if data is None else decode(name, data, version)

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
        return self._change(state.name, lambda s: s if s.by_hand else closed(s, self.clock()))

    def failed(self, name: str, error: str) -> BreakerState:
        """A transient failure of ``name``: counted; the breaker opens at the threshold, and
        a failed probe keeps it open for another cool-off."""
        return self._change(name, lambda s: counted(s, error, self.policy, self.clock()))

    def open_by_hand(self, name: str, by: str, reason: str) -> BreakerState:
        now = self.clock()
        return self._change(
            name,
            lambda s: replace(
                s, state=OPEN, since=now, next_probe=None, probe_at=None, by=by, reason=reason
            ),
        )

    def close_by_hand(self, name: str, by: str, reason: str) -> BreakerState:
        return self._change(name, lambda s: replace(closed(s, self.clock()), by=by, reason=reason))

    # --- transitions --------------------------------------------------------------------

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
        if forgettable(s) and s.version >= 0:
            client.delete(node_of(s.name), version=s.version)
            return replace(s, version=-1)
        if s.version < 0:
            client.create(node_of(s.name), encode(s), makepath=True)
            return replace(s, version=0)
        stat = client.set(node_of(s.name), encode(s), version=s.version)
        return replace(s, version=stat.version)


def snapshot(client: KazooClient, policy: Policy = DEFAULT_POLICY) -> list[BreakerState]:
    """Every breaker as it stands: what the dashboard, /metrics and the status pages show."""
    return Breakers(lambda: client, policy).snapshot()
