"""The environment of the queue's processes in a run: which servers, which chroot, and
every directory of theirs under the run's own root."""

from __future__ import annotations

import os
from pathlib import Path

# Set in the caller's environment they would win over REDIS_URL.
SENTINEL_VARS = ("REDIS_SENTINELS", "REDIS_SENTINEL_MASTER", "REDIS_SENTINEL_DB")


def queue_env(
    root: Path,
    *,
    database_url: str,
    zk_hosts: str,
    chroot: str,
    redis_url: str | None,
    secret_key: str,
    **more: str,
) -> dict[str, str]:
    """The caller's environment with the run's servers and directories, then ``more``.

    ``redis_url=None``: no ``REDIS_URL`` at all, for processes that find Redis through the
    Sentinel variables in ``more``. ``secret_key``: DEBUG is off by default, and then the
    development key is refused (check mq.E030).
    """
    env = os.environ | {
        "SECRET_KEY": secret_key,
        "ZK_HOSTS": zk_hosts,
        "ZK_CHROOT": chroot,
        "DATABASE_URL": database_url,
        "MQ_WORK_DIR": str(root / "work"),
        "MQ_STORAGE_ROOT": str(root / "storage"),
        "MQ_MINTER_DIR": str(root / "minter"),
        # The run's processes count their steps together, and apart from any other run's.
        "MQ_METRICS_DIR": str(root / "metrics"),
        "MQ_ALLOW_LOOPBACK": "true",
        # The run's web app has no proxy in front: loopback may read /metrics.
        "MQ_METRICS_ALLOW": "127.0.0.0/8,::1/128",
        "PYTHONUNBUFFERED": "1",
    }
    if redis_url is None:
        env.pop("REDIS_URL", None)
    else:
        env["REDIS_URL"] = redis_url
        for name in SENTINEL_VARS:
            env.pop(name, None)
    return env | more
