"""What each worker process is doing and whether it may take work: small Redis records that
the workers write and the Workers page reads, never a scan of the jobs.

Guarantees:

- Reading every worker's facts costs two round trips, whatever the queue holds: RQ's
  worker registry (state, current RQ job, birth, heartbeat) and this module's records.
- A worker's record (``RECORDS``, one hash field per worker) says the job and step it is
  running, since when, bytes so far and when it last beat. It outlives the process by
  ``KEPT_SECONDS``, so a worker that died mid-step is still shown with the job it held; a
  worker that stops cleanly removes its own.
- A drain flag (``drain_key``) is read by the worker before it takes each RQ job, again
  after it took one (a job taken as the flag was set goes back to the front of its queue),
  and before each next step of a chain: as the worker last heard it on its RQ command
  channel, where setting or lifting the flag is announced, and read again at most a second
  later in case the announcement was lost. It takes effect without the process being
  signalled, and is lifted by deleting it.
- Writing never raises into a step: a fact that cannot be written is logged and lost.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from redis import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

RECORDS = "mq:workers:records"
DRAIN_PREFIX = "mq:workers:drain:"
DAY_PREFIX = "mq:workers:day:"
DISPATCHER = "mq:workers:dispatcher"
RQ_WORKERS = "rq:workers"  # RQ's registry: the set of its workers' hash keys
PUBSUB_PREFIX = "rq:pubsub:"  # each RQ worker's command channel
DRAIN_COMMAND, UNDRAIN_COMMAND = "mq-drain", "mq-undrain"
# How long a dead worker's record is kept (and shown), and a day's counts.
KEPT_SECONDS = 86400
DAY_SECONDS = 2 * 86400
# A drain flag outlives a worker that dies drained, not forever.
DRAIN_SECONDS = 30 * 86400


def drain_key(name: str) -> str:
    return DRAIN_PREFIX + name


def today(now: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y-%m-%d")


# --- written by the worker ---------------------------------------------------------------


@dataclass
class Record:
    """One worker's record as written (times are Unix seconds)."""

    name: str
    host: str = ""
    pid: int = 0
    queues: list[str] = field(default_factory=list)
    beat: float = 0.0
    jid: str = ""
    step: str = ""
    since: float = 0.0
    so_far: int | None = None  # bytes the step has so far (a download)

    def dumps(self) -> str:
        return json.dumps(self.__dict__, separators=(",", ":"))

    @classmethod
    def loads(cls, name: str, raw: str | bytes) -> Record:
        try:
            data = json.loads(raw)
        except ValueError:  # a damaged record: shown as a name with nothing known
            return cls(name)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "name": name})


def write(redis: Redis, record: Record) -> None:
    try:
        redis.hset(RECORDS, record.name, record.dumps())
    except RedisError as e:
        log.warning("worker record of %s not written: %s", record.name, e)


def forget(redis: Redis, name: str) -> None:
    """A worker that stops cleanly: its record goes (a drain flag stays until it expires: a
    worker whose Redis went away works on under a new name, and takes its flag along)."""
    try:
        redis.hdel(RECORDS, name)
    except RedisError as e:
        log.warning("worker record of %s not removed: %s", name, e)


def prune(redis: Redis, now: float | None = None) -> int:
    """Remove the records of workers silent for longer than ``KEPT_SECONDS``."""
    now = time.time() if now is None else now
    old = [
        name
        for name, raw in redis.hgetall(RECORDS).items()
        if now - Record.loads(_text(name), raw).beat > KEPT_SECONDS
    ]
    if old:
        redis.hdel(RECORDS, *old)
    return len(old)


def count(redis: Redis, name: str, *, done: int = 0, failed: int = 0) -> None:
    """Add to the worker's counts of the day: steps done, jobs failed."""
    if not done and not failed:
        return
    key = DAY_PREFIX + today()
    try:
        with redis.pipeline(transaction=False) as pipe:
            if done:
                pipe.hincrby(key, f"{name}:done", done)
            if failed:
                pipe.hincrby(key, f"{name}:failed", failed)
            pipe.expire(key, DAY_SECONDS)
            pipe.execute()
    except RedisError as e:
        log.warning("worker counts of %s not written: %s", name, e)


def drained(redis: Redis, name: str) -> bool:
    return bool(redis.exists(drain_key(name)))


# --- drain and undrain (an operator's action) ----------------------------------------------


def drain(redis: Redis, name: str, by: str, reason: str) -> bool:
    """Ask worker ``name`` to take no more work; False if it was asked already."""
    flag = json.dumps({"by": by, "reason": reason, "at": time.time()})
    with redis.pipeline(transaction=False) as pipe:
        pipe.set(drain_key(name), flag, nx=True, ex=DRAIN_SECONDS)
        _tell(pipe, name, DRAIN_COMMAND)
        done, _ = pipe.execute()
    return bool(done)


def undrain(redis: Redis, name: str) -> bool:
    """Let worker ``name`` take work again; False if it was not drained."""
    with redis.pipeline(transaction=False) as pipe:
        pipe.delete(drain_key(name))
        _tell(pipe, name, UNDRAIN_COMMAND)
        done, _ = pipe.execute()
    return bool(done)


def _tell(pipe, name: str, command: str) -> None:
    """Tell the worker at once, on the channel RQ's workers listen to for commands (the flag
    is the truth; the worker reads it again within a second if the message is lost)."""
    pipe.publish(PUBSUB_PREFIX + name, json.dumps({"command": command}))


def standing(redis: Redis, name: str) -> tuple[bool, bool, bool]:
    """Whether worker ``name`` is drained, registered with RQ, and has a record here."""
    with redis.pipeline(transaction=False) as pipe:
        pipe.exists(drain_key(name))
        pipe.sismember(RQ_WORKERS, "rq:worker:" + name)
        pipe.hexists(RECORDS, name)
        drained, registered, recorded = pipe.execute()
    return bool(drained), bool(registered), bool(recorded)


# --- the dispatcher's health --------------------------------------------------------------


def dispatcher_swept(redis: Redis, host: str, pid: int, enqueued: int, took: float) -> None:
    """The dispatcher's last full sweep, kept for a day."""
    facts = {"host": host, "pid": pid, "at": time.time(), "enqueued": enqueued, "took": took}
    try:
        redis.set(DISPATCHER, json.dumps(facts), ex=KEPT_SECONDS)
    except RedisError as e:
        log.warning("dispatcher health not written: %s", e)


# --- read by the page ---------------------------------------------------------------------


@dataclass
class Facts:
    """Everything the page shows of the workers, read in two round trips."""

    registered: dict[str, dict[str, str]]  # RQ's hash of each registered worker, by name
    records: dict[str, Record]
    drains: dict[str, dict]
    day: dict[str, int]  # "<name>:done" / "<name>:failed"
    dispatcher: dict | None


def read(redis: Redis) -> Facts:
    with redis.pipeline(transaction=False) as pipe:
        pipe.smembers(RQ_WORKERS)
        pipe.hgetall(RECORDS)
        pipe.hgetall(DAY_PREFIX + today())
        pipe.get(DISPATCHER)
        keys, records, day, dispatcher = pipe.execute()
    keys = sorted(_text(k) for k in keys)
    names = [k.removeprefix("rq:worker:") for k in keys]
    by_name = {_text(n): Record.loads(_text(n), raw) for n, raw in records.items()}
    every = sorted(set(names) | set(by_name))
    with redis.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.hgetall(key)
        for name in every:
            pipe.get(drain_key(name))
        got = pipe.execute()
    hashes, flags = got[: len(keys)], got[len(keys) :]
    registered = {
        name: {_text(k): _text(v) for k, v in h.items()}
        for name, h in zip(names, hashes, strict=True)
        if h  # expired between the two round trips
    }
    drains = {n: json.loads(f) for n, f in zip(every, flags, strict=True) if f}
    return Facts(
        registered=registered,
        records=by_name,
        drains=drains,
        day={_text(k): int(v) for k, v in day.items()},
        dispatcher=json.loads(dispatcher) if dispatcher else None,
    )


def oldest_waiting(redis: Redis, queues: list[str]) -> tuple[str, float] | None:
    """The queue whose first RQ job has waited longest, and since when (Unix seconds): how far
    the workers are behind what the dispatcher handed them. Two round trips."""
    with redis.pipeline(transaction=False) as pipe:
        for name in queues:
            pipe.lindex(f"rq:queue:{name}", 0)
        firsts = pipe.execute()
    waiting = [(q, _text(j)) for q, j in zip(queues, firsts, strict=True) if j]
    if not waiting:
        return None
    with redis.pipeline(transaction=False) as pipe:
        for _, job_id in waiting:
            pipe.hget(f"rq:job:{job_id}", "enqueued_at")
        times = pipe.execute()
    seen = [
        (datetime.fromisoformat(_text(at).replace("Z", "+00:00")).timestamp(), queue)
        for (queue, _), at in zip(waiting, times, strict=True)
        if at
    ]
    if not seen:
        return None
    at, queue = min(seen)
    return queue, at


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
