"""A bound on the downloads in flight per remote host, shared by every worker process.

Workers are separate processes on possibly separate machines, so the count lives in Redis:
one sorted set per host whose members are leases, scored by the time they expire (Redis's
own clock, so the workers' clocks need not agree). Taking a slot drops the expired leases
and adds one only if fewer than ``limit`` remain, in one script, so two workers never both
take the last slot.

Guarantees: ``hold`` never waits: it takes a slot on every host or none, and says which host
was full. A lease is renewed while it is held and expires ``ttl`` seconds after its holder
stops renewing it (a killed or frozen worker), so no slot leaks for longer than that. One
thread per ``HostSlots`` renews every lease held through it, at least every ``ttl / 3``
seconds, and ends when none is left: a download starts no thread of its own. A lease held
for a step is renewed only while its ``alive`` check passes (the worker's ZooKeeper session
still holds the step): a worker cut off from ZooKeeper but not from Redis, whose step another
worker may already run, lets its slot expire instead of keeping it for a download nobody will
keep. Leaving the lease (a step ending, or abandoned with an exception) releases it at once.
A Redis error while renewing is logged and retried at the next renewal. While Redis cannot be
reached, ``hold`` grants an empty lease: the bound is about sharing workers fairly, and a
Redis outage must not fail jobs that are already running.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable

from redis.exceptions import RedisError

log = logging.getLogger(__name__)

KEY_PREFIX = "mq:hostslots:"

# KEYS[1]: the host's set; ARGV: lease id, limit, ttl in ms. 1 when taken, 0 when full.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""

# Renews a lease that is still there; a lease that expired meanwhile is not brought back.
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  return 1
end
return 0
"""


class HostFull(Exception):
    def __init__(self, host: str, limit: int) -> None:
        super().__init__(f"{host} already has {limit} download(s) in flight")
        self.host, self.limit = host, limit


class HostSlots:
    """``limit`` leases per host (0 or less: no bound), each expiring ``ttl`` seconds after
    its last renewal."""

    def __init__(self, redis, limit: int, ttl: float = 60.0) -> None:
        self.redis, self.limit, self.ttl = redis, limit, ttl
        self._ttl_ms = max(1, int(ttl * 1000))
        self._take = redis.register_script(_TAKE)
        self._renew = redis.register_script(_RENEW)
        # lease id: its hosts and its ``alive`` check, while held
        self._held: dict[str, tuple[list[str], Callable[[], bool] | None]] = {}
        self._lock = threading.Lock()
        self._renewer: threading.Thread | None = None

    def hold(
        self, hosts: Iterable[str], alive: Callable[[], bool] | None = None, extra: int = 0
    ) -> Lease:
        """A slot on each of ``hosts``, renewed while ``alive()`` is true; ``HostFull``
        naming the first full one. ``extra``: slots this lease may take beyond ``limit``
        (a small job's, so that a host busy with long downloads still serves it)."""
        hosts = sorted({h.lower() for h in hosts if h})
        if self.limit <= 0 or not hosts:
            return Lease(self, [])
        limit = self.limit + max(0, extra)
        lease_id = uuid.uuid4().hex
        taken: list[str] = []
        try:
            for host in hosts:
                if not self._take(keys=[KEY_PREFIX + host], args=[lease_id, limit, self._ttl_ms]):
                    self._release(lease_id, taken)
                    raise HostFull(host, limit)
                taken.append(host)
        except RedisError:
            log.warning("Redis unreachable: downloading from %s without a slot", hosts)
            return Lease(self, taken, lease_id, alive)
        return Lease(self, taken, lease_id, alive)

    def in_flight(self, host: str) -> int:
        """Leases of ``host`` not yet expired (by Redis's clock)."""
        seconds, micros = self.redis.time()
        now = seconds * 1000 + micros // 1000
        return int(self.redis.zcount(KEY_PREFIX + host.lower(), f"({now}", "+inf"))

    def _release(self, lease_id: str, hosts: list[str]) -> None:
        for host in hosts:
            self.redis.zrem(KEY_PREFIX + host, lease_id)

    def _renew_all(self, lease_id: str, hosts: list[str]) -> None:
        for host in hosts:
            self._renew(keys=[KEY_PREFIX + host], args=[lease_id, self._ttl_ms])

    def _keep(self, lease_id: str, hosts: list[str], alive: Callable[[], bool] | None) -> None:
        with self._lock:
            self._held[lease_id] = (hosts, alive)
            # A thread inherited through fork() is not alive in the child.
            if self._renewer is None or not self._renewer.is_alive():
                self._renewer = threading.Thread(
                    target=self._renew_held, name="host-slots", daemon=True
                )
                self._renewer.start()

    def _drop(self, lease_id: str) -> None:
        with self._lock:
            self._held.pop(lease_id, None)

    def _renew_held(self) -> None:
        while True:
            time.sleep(self.ttl / 3)
            with self._lock:
                if not self._held:
                    self._renewer = None
                    return
                held = list(self._held.items())
            for lease_id, (hosts, alive) in held:
                if alive is not None and not _passes(alive):
                    continue  # left to expire: its step may be another worker's by now
                try:
                    # A lease released meanwhile is not brought back (_RENEW).
                    self._renew_all(lease_id, hosts)
                except Exception:
                    log.warning("could not renew download slots of %s", hosts, exc_info=True)


def _passes(alive: Callable[[], bool]) -> bool:
    try:
        return alive()
    except Exception:  # a check that cannot tell keeps nothing alive
        log.warning("could not tell whether a download slot's step lives on", exc_info=True)
        return False


class Lease:
    """Slots taken together; a context manager that keeps them renewed until it exits."""

    def __init__(
        self,
        slots: HostSlots,
        hosts: list[str],
        lease_id: str = "",
        alive: Callable[[], bool] | None = None,
    ) -> None:
        self.slots, self.hosts, self.lease_id, self.alive = slots, hosts, lease_id, alive

    def __enter__(self) -> Lease:
        if self.hosts:
            self.slots._keep(self.lease_id, self.hosts, self.alive)
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def release(self) -> None:
        if self.hosts:
            self.slots._drop(self.lease_id)
            try:
                self.slots._release(self.lease_id, self.hosts)
            except Exception:  # the lease expires on its own; never mask the step's outcome
                log.warning("could not release download slots of %s", self.hosts, exc_info=True)
            self.hosts = []
