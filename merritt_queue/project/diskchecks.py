"""System checks of the settings that say where the queue writes and how much it may hold:
the working disk, the container paths, the queue's capacity, ZooKeeper's index directories and
the download limits against the disk (``mq.E...``; registered by ``checks.register``)."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.core import checks

from .vardir import inside_install


def check_disk_threshold(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if 1 <= settings.MQ_DISK_THRESHOLD <= 99:
        return []
    return [
        checks.Error(
            f"MQ_DISK_THRESHOLD={settings.MQ_DISK_THRESHOLD!r} is outside 1..99 (percent used).",
            hint="Set MQ_DISK_THRESHOLD to a percentage between 1 and 99, e.g. 80.",
            id="mq.E005",
        )
    ]


def check_work_dir(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    path = str(settings.MQ_WORK_DIR)
    if inside_install(path):  # mq.E100 says so; nothing is created there
        return []
    try:
        os.makedirs(path, exist_ok=True)
        problem = None if os.access(path, os.W_OK | os.X_OK) else "is not writable"
    except OSError as exc:
        problem = f"cannot be created ({exc.strerror or exc})"
    if problem is None:
        return []
    return [
        checks.Error(
            f"MQ_WORK_DIR={path!r} {problem}.",
            hint="Set MQ_WORK_DIR to a directory this process can create and write.",
            id="mq.E006",
        )
    ]


def check_container_paths(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    depth, length = settings.MQ_CONTAINER_MAX_DEPTH, settings.MQ_CONTAINER_MAX_PATH_BYTES
    if 1 <= depth and 255 <= length <= 3072:
        return []
    return [
        checks.Error(
            f"MQ_CONTAINER_MAX_DEPTH={depth!r} must be at least 1, and "
            f"MQ_CONTAINER_MAX_PATH_BYTES={length!r} must be between 255 and 3072.",
            hint="Set MQ_CONTAINER_MAX_DEPTH to the deepest entry a container may hold, e.g. 32, "
            "and MQ_CONTAINER_MAX_PATH_BYTES to its longest path in bytes, e.g. 1024 (the rest "
            "of the 4096-byte PATH_MAX is left for the work directory and the storage root).",
            id="mq.E050",
        )
    ]


def check_capacity(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    batch, collection = settings.MQ_MAX_BATCH_JOBS, settings.MQ_MAX_COLLECTION_JOBS
    queue = settings.MQ_MAX_QUEUE_JOBS
    out: list[checks.CheckMessage] = [
        checks.Error(
            f"{name}={value!r} must be at least 1.",
            hint=f"Set {name} to a number of jobs; see the README's configuration table.",
            id="mq.E040",
        )
        for name, value in (
            ("MQ_MAX_BATCH_JOBS", batch),
            ("MQ_MAX_COLLECTION_JOBS", collection),
            ("MQ_MAX_QUEUE_JOBS", queue),
        )
        if value < 1
    ]
    if not out and not batch <= collection <= queue:
        out.append(
            checks.Error(
                f"MQ_MAX_BATCH_JOBS={batch} <= MQ_MAX_COLLECTION_JOBS={collection} <= "
                f"MQ_MAX_QUEUE_JOBS={queue} does not hold: some batches could never be accepted.",
                hint="Raise the larger limits or lower the smaller ones.",
                id="mq.E041",
            )
        )
    return out


def check_index_dirs(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """MQ_MAX_QUEUE_JOBS lets ``/jobs`` and ``/jobs/states/completed`` hold that many children:
    past the warning share of a Java client's listing limit, those directories could not be
    kept readable by Merritt's services. The live sizes are ``check_tree``'s and /healthz's."""
    from ..core import indexdirs

    limit = settings.MQ_ZK_MAXBUFFER
    if limit < indexdirs.MIN_MAXBUFFER:
        return [
            checks.Error(
                f"MQ_ZK_MAXBUFFER={limit} is below ZooKeeper's smallest useful "
                f"jute.maxbuffer ({indexdirs.MIN_MAXBUFFER} bytes).",
                hint="Leave it unset (1048575, ZooKeeper's default) unless every Java client "
                "of the ensemble runs with a larger -Djute.maxbuffer.",
                id="mq.E091",
            )
        ]
    full = indexdirs.estimate_bytes(settings.MQ_MAX_QUEUE_JOBS, indexdirs.INDEX_WIDTH)
    if full < indexdirs.WARN_FRACTION * limit:
        return []
    return [
        checks.Warning(
            f"MQ_MAX_QUEUE_JOBS={settings.MQ_MAX_QUEUE_JOBS} lets /jobs/states/completed list "
            f"{full} bytes, {100 * full / limit:.0f} % of MQ_ZK_MAXBUFFER={limit}: past the "
            "limit Merritt's Java services cannot list it.",
            hint="Lower MQ_MAX_QUEUE_JOBS, keep retention on (MQ_CLEANUP_AUTO), or raise "
            "MQ_ZK_MAXBUFFER where every Java client runs with that jute.maxbuffer.",
            id="mq.W091",
        )
    ]


def check_download_limits(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    if settings.MQ_MAX_DOWNLOAD_BYTES < 0:
        errors.append(
            checks.Error(
                f"MQ_MAX_DOWNLOAD_BYTES={settings.MQ_MAX_DOWNLOAD_BYTES!r} must not be negative.",
                hint="Set MQ_MAX_DOWNLOAD_BYTES to the largest download of undeclared size in "
                "bytes, e.g. 107374182400 (0: no limit).",
                id="mq.E020",
            )
        )
    errors += _download_cap_against_disk()
    if settings.MQ_MAX_DOWNLOADS_PER_HOST < 0 or settings.MQ_HOST_WAIT_SECONDS <= 0:
        errors.append(
            checks.Error(
                f"MQ_MAX_DOWNLOADS_PER_HOST={settings.MQ_MAX_DOWNLOADS_PER_HOST!r} must not be "
                f"negative, and MQ_HOST_WAIT_SECONDS={settings.MQ_HOST_WAIT_SECONDS!r} must be "
                "positive.",
                hint="Set MQ_MAX_DOWNLOADS_PER_HOST to the downloads one remote host may have "
                "in flight across all workers, e.g. 2 (0: no bound), and MQ_HOST_WAIT_SECONDS "
                "to seconds, e.g. 15.",
                id="mq.E021",
            )
        )
    if settings.MQ_FETCH_TIMEOUT <= 0 or settings.MQ_FETCH_DEADLINE < 0:
        errors.append(
            checks.Error(
                f"MQ_FETCH_TIMEOUT={settings.MQ_FETCH_TIMEOUT!r} must be positive and "
                f"MQ_FETCH_DEADLINE={settings.MQ_FETCH_DEADLINE!r} must not be negative.",
                hint="Set MQ_FETCH_TIMEOUT to seconds, e.g. 30, and MQ_FETCH_DEADLINE to "
                "seconds, e.g. 21600 (0: no deadline).",
                id="mq.E022",
            )
        )
    return errors


def _download_cap_against_disk() -> list[checks.CheckMessage]:
    """A cap on downloads of undeclared size larger than the working disk: each such file
    reserves the disk's share under the threshold instead (``deposit.reserve``), so it waits
    in Provisioning until the disk is nearly empty."""
    cap = settings.MQ_MAX_DOWNLOAD_BYTES
    total = _disk_size(Path(settings.MQ_WORK_DIR))
    if total is None or 0 < cap <= total or cap < 0:
        return []
    said = "0 (no limit)" if cap == 0 else str(cap)
    return [
        checks.Warning(
            f"MQ_MAX_DOWNLOAD_BYTES={said} is larger than the working disk ({total} bytes, "
            "MQ_WORK_DIR): it limits nothing, and a file of undeclared size may reserve half "
            "the room left under MQ_DISK_THRESHOLD, leaving little to the jobs after it.",
            hint="Set MQ_MAX_DOWNLOAD_BYTES to the largest file of undeclared size the "
            "working disk should take, well below its size.",
            id="mq.W024",
        )
    ]


def _disk_size(path: Path) -> int | None:
    """The size of the disk ``path`` is on (its nearest existing folder's), or None."""
    for folder in (path, *path.parents):
        try:
            st = os.statvfs(folder)
        except OSError:
            continue
        return st.f_blocks * st.f_frsize
    return None
