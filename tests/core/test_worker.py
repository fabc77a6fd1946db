"""The worker process (``QueueWorker``) stops on SIGTERM, idle or busy, as systemd expects."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.procs import TEST_SECRET_KEY

REPO = Path(__file__).resolve().parents[2]


def test_an_idle_worker_stops_on_sigterm(redis, tmp_path):
    """It used to take the stop for Redis going away and start over under a new name."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "merritt_queue.project.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "REDIS_URL": os.environ["REDIS_URL"],
        "PYTHONUNBUFFERED": "1",
        "SECRET_KEY": TEST_SECRET_KEY,
    }
    queue = "mq-admin"  # a configured queue; this Redis is the test's own
    log = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "rqworker", queue],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not redis.smembers(f"rq:workers:{queue}") and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()
            time.sleep(0.2)
        assert redis.smembers(f"rq:workers:{queue}"), "the worker never registered"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, (tmp_path / "worker.log").read_text()
        assert "working again" not in (tmp_path / "worker.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def test_a_worker_writes_its_heartbeat_and_state_once_per_change(redis, monkeypatch):
    """RQ's loop repeats the heartbeat (three commands) and the state around every job;
    ``QueueWorker`` sends each once per change, and still leaves the worker's key with its
    idle time to live after a job (not the job's longer one)."""
    import redis.connection as rc
    from rq import Queue
    from rq.defaults import DEFAULT_WORKER_TTL

    from merritt_queue.core.worker import QueueWorker

    sent = []
    send = rc.AbstractConnection.send_packed_command
    monkeypatch.setattr(
        rc.AbstractConnection,
        "send_packed_command",
        lambda self, *a, **k: sent.append(1) or send(self, *a, **k),
    )
    ttls = []

    class Probe(QueueWorker):
        def teardown(self):
            ttls.append(self.connection.ttl(self.key))
            super().teardown()

    def burst(jobs: int) -> int:
        queue = Queue("mq-admin", connection=redis)
        for i in range(jobs):
            queue.enqueue_call("operator.add", args=(i, 1), result_ttl=0, timeout=3600)
        sent.clear()
        assert Probe([queue], connection=redis).work(burst=True) == (jobs > 0)
        return len(sent)

    per_job = (burst(5) - burst(0)) / 5
    # RQ's own loop makes over 25 (pinned 3.0); what is left is the job's own and the registries.
    assert per_job <= 18, per_job
    assert 0 < ttls[0] <= DEFAULT_WORKER_TTL + 60


def test_a_worker_imports_the_tasks_before_its_first_job(redis, monkeypatch):
    """RQ imports a job's function when the job comes: the first deposit waited for it."""
    from django.conf import settings
    from rq import Queue

    from merritt_queue.project.tasks import Worker

    assert settings.RQ["WORKER_CLASS"] == "merritt_queue.project.tasks.Worker"
    assert Worker.preload == ("jobs.tasks", "batches.tasks")
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    monkeypatch.setattr(Worker, "preload", ("colorsys",))
    Worker([Queue("mq-admin", connection=redis)], connection=redis).work(burst=True)
    assert "colorsys" in sys.modules


def test_a_stop_signal_that_comes_as_the_worker_registers_stops_it_cleanly(redis):
    """RQ registers a worker before it installs its signal handlers: a SIGTERM in between
    (systemd stopping a unit that just started, or the test above under load) killed the
    process outright and left its registration behind."""
    from rq import Queue

    from merritt_queue.core.worker import QueueWorker

    class SignalledAsItRegisters(QueueWorker):
        def register_birth(self) -> None:
            super().register_birth()
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.getsignal(signal.SIGTERM)
    worker = SignalledAsItRegisters([Queue("mq-admin", connection=redis)], connection=redis)
    try:
        assert worker.work(burst=False) is False
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not redis.smembers("rq:workers:mq-admin"), "its registration was left behind"
