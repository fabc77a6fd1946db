"""The worker process (``QueueWorker``) stops on SIGTERM, idle or busy, as systemd expects."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.procs import TEST_SECRET_KEY

REPO = Path(__file__).resolve().parent.parent


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
