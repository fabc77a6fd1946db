"""The RQ worker class: a ``SimpleWorker`` that outlives Redis going away.

RQ's own loop retries a lost Redis only while it waits for a job; a connection error while a
job finishes (its result, the registries, the heartbeat) makes it log "found an unhandled
exception, quitting" and return, and the worker process exits. Losing Redis loses nothing
here (ZooKeeper holds the truth and the dispatcher enqueues again), so the worker waits for
Redis to answer and goes back to work under a fresh name, since its old registration may be
gone (flush, restart) or still look alive (a short outage).

A job interrupted that way has either committed its step in ZooKeeper or not; in both cases
the dispatcher's next sweep does the right thing.

RQ's loop also writes the worker's heartbeat (three commands) and its state several times
around every job, most of them repeating within milliseconds what was just written, and asks
Redis whether workers are suspended before every job. Here a heartbeat is one round trip, one
that repeats the last (same time to live, written moments ago) and a state already written are
left out, and the suspension is asked at most every ``suspension_check_interval`` seconds.
The registrations, the started registry and the jobs' statuses are written as RQ writes them.
"""

from __future__ import annotations

import importlib
import logging
import time
from uuid import uuid4

from redis.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.exceptions import StopRequested
from rq.worker import SimpleWorker

log = logging.getLogger(__name__)

REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)


class QueueWorker(SimpleWorker):
    max_reconnect_wait = 5.0
    # A heartbeat or state this recent is not written again. Far below the heartbeat's time
    # to live (worker_ttl + 60 s), which outlasts the blocking dequeue (worker_ttl - 15 s).
    repeat_write_interval = 5.0
    # How late a worker may notice ``rq suspend``: it then takes no new job.
    suspension_check_interval = 5.0
    # Modules imported as the worker starts (the project's tasks, by dotted path): RQ
    # imports a job's function when the job comes, and the first deposit would wait for it.
    preload: tuple[str, ...] = ()
    # RQ's "result is kept for N seconds" after every job: the same line each time (the
    # dispatcher sets one time to live for all), not worth its write per job.
    log_result_lifespan = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._forget_writes()
        self._next_suspension_check = 0.0

    def _forget_writes(self) -> None:
        self._beat: tuple[int, float] | None = None  # (time to live, monotonic time)
        self._state_at: tuple[str, float] | None = None

    def _recent(self, written: tuple | None, value) -> bool:
        return (
            written is not None
            and written[0] == value
            and time.monotonic() - written[1] < self.repeat_write_interval
        )

    def register_birth(self) -> None:
        super().register_birth()
        self._forget_writes()  # a new registration starts from an empty hash

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        ttl = timeout or self.worker_ttl + 60
        if pipeline is not None:
            super().heartbeat(timeout, pipeline)
        elif self._recent(self._beat, ttl):
            return
        else:
            with self.connection.pipeline(transaction=False) as own:
                super().heartbeat(timeout, own)
                own.execute()
        self._beat = (ttl, time.monotonic())

    def set_state(self, state: str, pipeline: Pipeline | None = None) -> None:
        if pipeline is None and self._recent(self._state_at, state):
            self._state = state
            return
        super().set_state(state, pipeline)
        self._state_at = (state, time.monotonic())

    def check_for_suspension(self, burst: bool) -> None:
        if time.monotonic() < self._next_suspension_check:
            return
        super().check_for_suspension(burst)
        self._next_suspension_check = time.monotonic() + self.suspension_check_interval

    def work(self, burst: bool = False, *args, **kwargs):
        """Work until asked to stop; start over after Redis went away (not in burst mode)."""
        for module in self.preload:
            importlib.import_module(module)
        while True:
            failed = None
            try:
                worked = super().work(burst, *args, **kwargs)
            except REDIS_DOWN as e:  # raised from RQ's teardown, when it reports its death
                failed = e
                worked = False
            except StopRequested:  # a stop signal while this loop waited for Redis
                return False
            # Any other end was asked for: a stop signal, burst, job or idle limits.
            bounded = kwargs.get("max_jobs") is not None or kwargs.get("max_idle_time") is not None
            if burst or bounded:
                if failed:
                    raise failed
                return worked
            if self._asked_to_stop():
                return worked
            # RQ swallowed the reason (it logged it); by now Redis may already be back, so
            # any end nobody asked for starts the loop again, never faster than once a second.
            time.sleep(1.0)
            self._wait_for_redis()
            self.name = uuid4().hex
            log.warning("Redis is back; working again as %s", self.name)

    def _asked_to_stop(self) -> bool:
        # An idle worker's stop signal ends RQ's loop without setting _stop_requested
        # (only a busy one's does); the signal's date is set either way.
        return self._stop_requested or self._shutdown_requested_date is not None

    def _redis_answers(self) -> bool:
        try:
            return bool(self.connection.ping())
        except RedisError:
            return False

    def _wait_for_redis(self) -> None:
        wait = 0.5
        while not self._asked_to_stop():
            if self._redis_answers():
                return
            log.warning("Redis does not answer; trying again in %.1f s", wait)
            time.sleep(wait)
            wait = min(wait * 2, self.max_reconnect_wait)
