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

The Workers page reads each worker's record (``workerfacts``): the worker writes it with its
heartbeat, when a step begins and ends (``doing``, called by the task), and every
``beat_seconds`` while a job runs, from a thread, since RQ's loop is silent then. A drained
worker (``workerfacts.drain``) finishes what it runs, takes no more RQ jobs and idles, beating,
until it is undrained or stopped; it hears of the flag on its RQ command channel, or reads it
within ``drain_check_interval``, and a job it dequeued after that goes back to the front of
its queue. An idle worker
waits for a job ``beat_seconds`` at a time, not RQ's 405 s, so that its heartbeat says it is
alive.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from dataclasses import replace
from uuid import uuid4

from redis.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.command import parse_payload
from rq.exceptions import StopRequested
from rq.job import Job
from rq.queue import Queue
from rq.worker import SimpleWorker

from . import workerfacts
from .workerfacts import Record

log = logging.getLogger(__name__)

REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)
DRAINED = "drained"  # the worker's state while it takes no work

# The worker of this process, for the tasks it runs (``doing``, ``drained``): RQ hands a task
# its job, not its worker.
_running: QueueWorker | None = None


def doing(jid: str, step: str) -> None:
    """This process's worker began ``step`` of job ``jid`` (both empty: it ended)."""
    if _running is not None:
        _running.doing(jid, step)


def drained() -> bool:
    """Whether this process's worker was asked to take no more work."""
    return _running is not None and _running.drained()


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
    # How often a worker says it is alive, idle or busy; the page calls one silent for longer.
    beat_seconds = 10.0
    # How late a worker may notice it was drained (or undrained) if the announcement on its
    # command channel is lost: the flag is read before each RQ job and each next step of a
    # chain, but not more often than this.
    drain_check_interval = 1.0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._forget_writes()
        self._next_suspension_check = 0.0
        self._drain_known: tuple[bool, float] = (False, 0.0)  # (drained, monotonic time read)
        self.record = Record(self.name)
        # The record is written by the loop and by the busy thread (``_beat_while_busy``).
        self._record_lock = threading.Lock()
        self._busy = threading.Event()
        self._beating: threading.Thread | None = None

    @property
    def dequeue_timeout(self) -> int:
        return max(1, int(self.beat_seconds))

    def progress(self, record: Record) -> int | None:
        """Bytes the running step has so far, where that is cheap to tell; None if not."""
        return None

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
        workerfacts.prune(self.connection)
        with self._record_lock:
            self.record = Record(
                self.name,
                host=self.hostname or "",
                pid=self.pid or 0,
                queues=self.queue_names(),
                beat=time.time(),
            )
            workerfacts.write(self.connection, self.record)

    def register_death(self) -> None:
        super().register_death()
        workerfacts.forget(self.connection, self.name)

    def doing(self, jid: str, step: str) -> None:
        now = time.time()
        with self._record_lock:
            self.record.jid, self.record.step, self.record.beat = jid, step, now
            self.record.since, self.record.so_far = (now if jid else 0.0), None
            workerfacts.write(self.connection, self.record)

    def drained(self) -> bool:
        """The drain flag, read at most every ``drain_check_interval`` seconds."""
        known, at = self._drain_known
        if time.monotonic() - at < self.drain_check_interval:
            return known
        try:
            known = workerfacts.drained(self.connection, self.name)
        except RedisError as e:
            # Asked between two steps of a chain too: Redis away must not cost the step
            # just done its commit. The loop meets Redis away on its own.
            log.warning("drain flag of %s not read, taken as it was: %s", self.name, e)
        self._drain_known = (known, time.monotonic())
        return known

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        """Take a job unless drained; one taken as the drain began goes back to its queue."""
        while True:
            if not self._idle_while_drained(burst=timeout is None):
                return None
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            if result is None or not self.drained():
                return result
            self._give_back(*result)

    def handle_payload(self, message) -> None:
        """RQ's commands, and the drain announced (in RQ's listening thread)."""
        command = parse_payload(message).get("command")
        if command in (workerfacts.DRAIN_COMMAND, workerfacts.UNDRAIN_COMMAND):
            self._drain_known = (command == workerfacts.DRAIN_COMMAND, time.monotonic())
            return
        super().handle_payload(message)

    def _idle_while_drained(self, burst: bool) -> bool:
        """Wait while drained; False: a drained worker in burst mode ends."""
        before = None
        while self.drained():
            if burst:
                return False
            if before is None:
                before = self.get_state()
                self.set_state(DRAINED)
                log.info("Worker %s: drained, taking no work", self.name)
            self.heartbeat()
            time.sleep(1.0)  # a stop signal raises StopRequested out of here
        if before is not None:
            self.set_state(before)
            log.info("Worker %s: undrained, taking work again", self.name)
        return True

    def _give_back(self, job: Job, queue: Queue) -> None:
        """Put a dequeued job back at the front of its queue, as if never taken."""
        log.info("Worker %s: drained; %s goes back to %s", self.name, job.id, queue.name)
        with self.connection.pipeline() as pipe:
            pipe.lrem(queue.intermediate_queue_key, 1, job.id)
            pipe.lpush(queue.key, job.id)
            pipe.execute()

    def execute_job(self, job: Job, queue: Queue):
        self._busy.set()
        try:
            return super().execute_job(job, queue)
        finally:
            self._busy.clear()
            if self.record.jid:  # a task that did not say its step ended
                self.doing("", "")

    def _beat_while_busy(self) -> None:
        """RQ writes no heartbeat while a job runs in the worker's own process."""
        while True:
            time.sleep(self.beat_seconds)
            if not self._busy.is_set():
                continue
            with self._record_lock:
                shown = replace(self.record)
            so_far = self.progress(shown) if shown.jid else None
            with self._record_lock:
                # A step that began or ended meanwhile wrote the record itself: a write of
                # the record as it was would undo it.
                if (self.record.jid, self.record.step) == (shown.jid, shown.step):
                    self.record.beat, self.record.so_far = time.time(), so_far
                    workerfacts.write(self.connection, self.record)

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        ttl = timeout or self.worker_ttl + 60
        if pipeline is not None:
            super().heartbeat(timeout, pipeline)
        elif self._recent(self._beat, ttl):
            return
        else:
            with self.connection.pipeline(transaction=False) as own:
                super().heartbeat(timeout, own)
                self._write_record(own)
                own.execute()
        if pipeline is not None:
            self._write_record(pipeline)
        self._beat = (ttl, time.monotonic())

    def _write_record(self, pipeline: Pipeline) -> None:
        with self._record_lock:
            if self.record.beat:  # registered
                self.record.beat = time.time()
                pipeline.hset(workerfacts.RECORDS, self.name, self.record.dumps())

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
        global _running
        for module in self.preload:
            importlib.import_module(module)
        _running = self
        if self._beating is None:
            self._beating = threading.Thread(target=self._beat_while_busy, daemon=True)
            self._beating.start()
        try:
            return self._work(burst, *args, **kwargs)
        finally:
            _running = None  # a task run later in this process (a test's) is no worker's

    def _work(self, burst: bool, *args, **kwargs):
        while True:
            failed = None
            # RQ registers the worker before it installs its handlers: a stop signal in
            # between would kill the process and leave the registration behind.
            self._install_signal_handlers()
            try:
                worked = super().work(burst, *args, **kwargs)
            except REDIS_DOWN as e:  # raised from RQ's teardown, when it reports its death
                failed = e
                worked = False
            except StopRequested:  # a stop signal while RQ started, or we waited for Redis
                self._unregister()
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
            self._rename(uuid4().hex)
            log.warning("Redis is back; working again as %s", self.name)

    def _unregister(self) -> None:
        try:
            self.teardown()
        except RedisError as e:
            log.warning("worker %s not unregistered: %s", self.name, e)

    def _rename(self, name: str) -> None:
        """A fresh name for a fresh registration; a drain asked of the old one still holds."""
        old, self.name = self.name, name
        try:
            if self.connection.exists(workerfacts.drain_key(old)):
                self.connection.rename(workerfacts.drain_key(old), workerfacts.drain_key(name))
        except RedisError as e:
            log.warning("drain flag of %s not carried over: %s", old, e)

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
