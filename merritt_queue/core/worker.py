"""The RQ worker class: a ``SimpleWorker`` that outlives Redis going away.

RQ's own loop retries a lost Redis only while it waits for a job; a connection error while a
job finishes (its result, the registries, the heartbeat) makes it log "found an unhandled
exception, quitting" and return, and the worker process exits. Losing Redis loses nothing
here (ZooKeeper holds the truth and the dispatcher enqueues again), so the worker waits for
Redis to answer and goes back to work under a fresh name, since its old registration may be
gone (flush, restart) or still look alive (a short outage).

A job interrupted that way has either committed its step in ZooKeeper or not; in both cases
the dispatcher's next sweep does the right thing.
"""

from __future__ import annotations

import logging
import time
from uuid import uuid4

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.exceptions import StopRequested
from rq.worker import SimpleWorker

log = logging.getLogger(__name__)

REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)


class QueueWorker(SimpleWorker):
    max_reconnect_wait = 5.0

    def work(self, burst: bool = False, *args, **kwargs):
        """Work until asked to stop; start over after Redis went away (not in burst mode)."""
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
