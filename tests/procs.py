"""The tests' settings for the queue's processes, over the shared harness (``harness``).

Processes, waiting and servers come from ``harness.procs`` and ``harness.services``; here
is only what tests give every process: their secret key, a sweep every second so a test
does not wait on the dispatcher, and mail that goes nowhere.

Used by ``tests.cluster`` (kill and fault tests), ``test_multiprocess_pg`` and
``test_redis_sentinel``.
"""

from __future__ import annotations

from pathlib import Path

from harness import env

TEST_SECRET_KEY = "tests-only-" + "k" * 50


def queue_env(
    root: Path,
    *,
    database_url: str,
    zk_hosts: str,
    chroot: str,
    redis_url: str | None,
    **more: str,
) -> dict[str, str]:
    """The environment of the queue's processes in a test, their directories under ``root``
    (``harness.env.queue_env``)."""
    return (
        env.queue_env(
            root,
            database_url=database_url,
            zk_hosts=zk_hosts,
            chroot=chroot,
            redis_url=redis_url,
            secret_key=TEST_SECRET_KEY,
            MQ_SWEEP_SECONDS="1",
            EMAIL_BACKEND="django.core.mail.backends.dummy.EmailBackend",
        )
        | more
    )
