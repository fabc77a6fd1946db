"""System checks for the queue's settings (``mq.E001`` ...), run by every manage.py command."""

from __future__ import annotations

import math
import os
import re
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks

from metrics.access import parse_networks

from ..core.sides import mode_problem
from .diskchecks import (
    check_capacity,
    check_container_paths,
    check_disk_threshold,
    check_download_limits,
    check_index_dirs,
    check_work_dir,
)
from .env import DEV_SECRET_KEY, known_time_zone
from .servicechecks import (
    check_content_base_url,
    check_ezid,
    check_local_id_service,
    check_merritt_api_profiles,
    check_profile_owner_arks,
    check_services,
)
from .vardir import check_var_dir

TAG = "merritt_queue"


def _bad_zk_host(entry: str) -> bool:
    host, sep, port = entry.strip().rpartition(":")
    return not (sep and host and port.isdigit() and 0 < int(port) < 65536)


def check_zk_hosts(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    entries = str(settings.ZK_HOSTS).split(",")
    bad = [e for e in entries if _bad_zk_host(e)]
    if not bad:
        return []
    return [
        checks.Error(
            f"ZK_HOSTS={settings.ZK_HOSTS!r} has malformed entries: {', '.join(map(repr, bad))}.",
            hint="Set ZK_HOSTS to a comma list of host:port, e.g. zk1:2181,zk2:2181; "
            "put the chroot in ZK_CHROOT, not in ZK_HOSTS.",
            id="mq.E001",
        )
    ]


def check_zk_chroot(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    chroot = str(settings.ZK_CHROOT)
    if chroot.startswith("/") and not chroot.endswith("/"):
        return []
    return [
        checks.Error(
            f"ZK_CHROOT={chroot!r} must start with '/' and must not end with '/'.",
            hint="Set ZK_CHROOT to an absolute ZooKeeper path such as /merritt.",
            id="mq.E002",
        )
    ]


def check_zk_timeout(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if settings.ZK_TIMEOUT > 0:
        return []
    return [
        checks.Error(
            f"ZK_TIMEOUT={settings.ZK_TIMEOUT!r} must be a positive number of seconds.",
            hint="Set ZK_TIMEOUT to e.g. 10.",
            id="mq.E003",
        )
    ]


def check_redis_url(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    scheme = urlsplit(str(settings.REDIS_URL)).scheme
    if scheme in ("redis", "rediss", "unix"):
        return []
    return [
        checks.Error(
            f"REDIS_URL={settings.REDIS_URL!r} has scheme {scheme!r}; "
            "expected redis, rediss or unix.",
            hint="Set REDIS_URL to e.g. redis://127.0.0.1:6379/0.",
            id="mq.E004",
        )
    ]


def check_redis_sentinel(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    problems = []
    if settings.REDIS_SENTINELS and not settings.REDIS_SENTINEL_MASTER:
        problems.append("REDIS_SENTINELS is set but REDIS_SENTINEL_MASTER is empty")
    if settings.REDIS_SENTINEL_MASTER and not settings.REDIS_SENTINELS:
        problems.append("REDIS_SENTINEL_MASTER is set but REDIS_SENTINELS is empty")
    if settings.REDIS_SENTINELS and settings.REDIS_URL_IS_SET:
        problems.append(
            "both REDIS_URL and REDIS_SENTINELS are set; the queue would use the Sentinels "
            "and ignore REDIS_URL"
        )
    if settings.REDIS_SENTINEL_DB < 0:
        problems.append(f"REDIS_SENTINEL_DB={settings.REDIS_SENTINEL_DB} is negative")
    return [
        checks.Error(
            f"Redis settings contradict each other: {problem}.",
            hint="For one Redis set only REDIS_URL. For a Sentinel-managed Redis set "
            "REDIS_SENTINELS=host:port,... and REDIS_SENTINEL_MASTER=<name> and unset REDIS_URL.",
            id="mq.E010",
        )
        for problem in problems
    ]


def check_replace_share(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if 0 <= settings.MQ_DESTRUCTIVE_REPLACE_SHARE <= 1:
        return []
    return [
        checks.Error(
            f"MQ_DESTRUCTIVE_REPLACE_SHARE={settings.MQ_DESTRUCTIVE_REPLACE_SHARE!r} is outside "
            "0..1 (a share of an object's bytes).",
            hint="Set MQ_DESTRUCTIVE_REPLACE_SHARE between 0 and 1, e.g. 0.5.",
            id="mq.E171",
        )
    ]


def check_lock_stale_seconds(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if settings.MQ_LOCK_STALE_SECONDS > 0:
        return []
    return [
        checks.Error(
            f"MQ_LOCK_STALE_SECONDS={settings.MQ_LOCK_STALE_SECONDS!r} must be positive.",
            hint="Set MQ_LOCK_STALE_SECONDS to the age in seconds after which a lock "
            "is reported as held too long, e.g. 3600.",
            id="mq.E007",
        )
    ]


def check_reconcile_seconds(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if settings.MQ_RECONCILE_SECONDS > 0:
        return []
    return [
        checks.Error(
            f"MQ_RECONCILE_SECONDS={settings.MQ_RECONCILE_SECONDS!r} must be positive.",
            hint="Set MQ_RECONCILE_SECONDS to the period in seconds of the mirror's full "
            "rebuild under `reconcile --watch`, e.g. 300.",
            id="mq.E008",
        )
    ]


def check_window_check_seconds(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    seconds = settings.MQ_WINDOW_CHECK_SECONDS
    if 1 <= seconds <= 60:
        return []
    return [
        checks.Error(
            f"MQ_WINDOW_CHECK_SECONDS={seconds!r} must be from 1 to 60.",
            hint="Set MQ_WINDOW_CHECK_SECONDS to the longest time in seconds between two "
            "checks of the maintenance windows by the dispatcher, e.g. 30.",
            id="mq.E012",
        )
    ]


def check_chain(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    steps, seconds = settings.MQ_CHAIN_STEPS, settings.MQ_CHAIN_SECONDS
    delay = settings.MQ_MIRROR_DELAY
    if steps >= 1 and seconds >= 0 and delay >= 0:
        return []
    return [
        checks.Error(
            f"MQ_CHAIN_STEPS={steps!r} must be at least 1, and MQ_CHAIN_SECONDS={seconds!r} "
            f"and MQ_MIRROR_DELAY={delay!r} must not be negative.",
            hint="Set MQ_CHAIN_STEPS to the steps a worker may run in a row for one job "
            "(1 for one step per RQ job, 8 for the whole pipeline), MQ_CHAIN_SECONDS to "
            "seconds, e.g. 30, and MQ_MIRROR_DELAY to seconds, e.g. 1 (0: no delay).",
            id="mq.E011",
        )
    ]


def check_worker_beat(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    beat, silent = settings.MQ_WORKER_BEAT_SECONDS, settings.MQ_WORKER_SILENT_SECONDS
    if beat >= 1 and silent >= 2 * beat:
        return []
    return [
        checks.Error(
            f"MQ_WORKER_BEAT_SECONDS={beat!r} must be at least 1, and "
            f"MQ_WORKER_SILENT_SECONDS={silent!r} at least twice it.",
            hint="A worker writes its record every MQ_WORKER_BEAT_SECONDS (e.g. 10); one "
            "missed beat must not show it silent on the Workers page (e.g. 60).",
            id="mq.E090",
        )
    ]


def check_lanes(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    small, urgent = settings.MQ_SMALL_JOB_BYTES, settings.MQ_URGENT_PRIORITY
    reserved = settings.MQ_RESERVED_WORKERS
    if small >= 0 and -1 <= urgent <= 99 and reserved >= 0:
        return []
    return [
        checks.Error(
            f"MQ_SMALL_JOB_BYTES={small!r} and MQ_RESERVED_WORKERS={reserved!r} must not be "
            f"negative, and MQ_URGENT_PRIORITY={urgent!r} must be between -1 and 99.",
            hint="MQ_SMALL_JOB_BYTES is bytes (0: no job is small), MQ_URGENT_PRIORITY a job "
            "priority (-1: no job is urgent), MQ_RESERVED_WORKERS how many reserved workers run.",
            id="mq.E134",
        )
    ]


def check_notify(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Depositors' notifications: at least one attempt, each with time to be answered."""
    if (
        settings.MQ_NOTIFY_ATTEMPTS >= 1
        and settings.MQ_NOTIFY_TIMEOUT > 0
        and 0 <= settings.MQ_NOTIFY_BACKOFF <= settings.MQ_NOTIFY_BACKOFF_MAX
        and settings.MQ_NOTIFY_MAIL_GATHER >= 0
    ):
        return []
    return [
        checks.Error(
            f"MQ_NOTIFY_ATTEMPTS={settings.MQ_NOTIFY_ATTEMPTS!r} must be at least 1, "
            f"MQ_NOTIFY_TIMEOUT={settings.MQ_NOTIFY_TIMEOUT!r} positive, "
            f"MQ_NOTIFY_BACKOFF={settings.MQ_NOTIFY_BACKOFF!r} between 0 and "
            f"MQ_NOTIFY_BACKOFF_MAX={settings.MQ_NOTIFY_BACKOFF_MAX!r}, and "
            f"MQ_NOTIFY_MAIL_GATHER={settings.MQ_NOTIFY_MAIL_GATHER!r} not negative.",
            hint="For example 8 attempts, a 10 s timeout, a 30 s backoff capped at 3600 s and "
            "60 s to gather an e-mail's events.",
            id="mq.E023",
        )
    ]


def check_secret_key(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    if settings.DEBUG or settings.SECRET_KEY != DEV_SECRET_KEY:
        return []
    return [
        checks.Error(
            "SECRET_KEY is the development default while DEBUG is off: anyone could forge "
            "sessions and signed confirmations.",
            hint="Set SECRET_KEY to a long random value kept out of the repository "
            "(or DEBUG=true on a development machine).",
            id="mq.E030",
        )
    ]


def check_workers(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    problem = mode_problem(settings.MQ_WORKERS)
    if problem is None:
        return []
    return [
        checks.Error(
            problem,
            hint="Set MQ_WORKERS to none to start beside Merritt's own ingest, own once this "
            "project's workers should run the batches submitted here, all when no Merritt "
            "ingest uses the ensemble.",
            id="mq.E031",
        )
    ]


def check_display_time_zone(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    zone = settings.MQ_DISPLAY_TIME_ZONE
    if known_time_zone(zone):
        return []
    return [
        checks.Error(
            f"MQ_DISPLAY_TIME_ZONE={zone!r} is not a time zone this host knows; pages show UTC.",
            hint="Use an IANA name such as UTC, America/Los_Angeles or Europe/Zurich.",
            id="mq.E060",
        )
    ]


def check_request_limit(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    limit, floor = settings.MQ_MAX_REQUEST_BYTES, settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
    if limit >= max(floor, 1):
        return []
    return [
        checks.Error(
            f"MQ_MAX_REQUEST_BYTES={limit!r} is below DATA_UPLOAD_MAX_MEMORY_SIZE ({floor}): "
            "forms Django would accept are refused unread.",
            hint="The default is 4194304 (4 MB); uploads have their own MQ_MAX_UPLOAD_BYTES.",
            id="mq.E080",
        )
    ]


def check_step_cut_off(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    seconds = settings.MQ_STEP_CUT_OFF_SECONDS
    if 0 <= seconds < math.inf:
        return []
    return [
        checks.Error(
            f"MQ_STEP_CUT_OFF_SECONDS={seconds!r} must be a number of seconds, 0 or more.",
            hint="A step cut off from ZooKeeper waits this long for its session before it "
            "gives up; the default is ZK_TIMEOUT, past which the session is gone anyway.",
            id="mq.E084",
        )
    ]


def check_web_zk_wait(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    wait = settings.MQ_WEB_ZK_WAIT
    if 0 < wait <= 60:
        return []
    return [
        checks.Error(
            f"MQ_WEB_ZK_WAIT={wait!r} must be more than 0 and at most 60 seconds.",
            hint="A page waits this long for an unreachable ZooKeeper; the default is 5.",
            id="mq.E082",
        )
    ]


def check_proxy_ssl_header(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    name = settings.SECURE_PROXY_SSL_HEADER_NAME
    if not name or re.fullmatch(r"[A-Za-z0-9]+(-[A-Za-z0-9]+)*", name):
        return []
    return [
        checks.Error(
            f"SECURE_PROXY_SSL_HEADER={name!r} is not a header name.",
            hint="Name the header the proxy sets to https, e.g. X-Forwarded-Proto.",
            id="mq.E081",
        )
    ]


def check_metrics_allow(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    _, bad = parse_networks(settings.MQ_METRICS_ALLOW)
    if not bad:
        return []
    return [
        checks.Error(
            f"MQ_METRICS_ALLOW has entries that are not networks: {', '.join(bad)}",
            hint="Give networks or addresses, comma-separated, e.g. 127.0.0.0/8,::1/128,"
            "10.1.2.0/24. Until then only a request with MQ_METRICS_TOKEN may read /metrics.",
            id="mq.E070",
        )
    ]


def check_metrics_dir(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    path = settings.MQ_METRICS_DIR
    if not path or (os.path.isdir(path) and os.access(path, os.W_OK)):
        return []
    return [
        checks.Warning(
            f"MQ_METRICS_DIR {path!r} is not a writable directory",
            hint="Every process of this host counts its steps there and /metrics sums them; "
            "without it /metrics shows only the web process's own counts.",
            id="mq.W071",
        )
    ]


def check_stall_settings(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """The stalled jobs' settings (jobs.stalls): a bound learned from no step would flag
    every job, and a window or a cache of no length learns from nothing or on every page."""
    problems = [
        f"{name}={getattr(settings, name)!r} must be at least {least}"
        for name, least in (
            ("MQ_STALL_WINDOW_DAYS", 1),
            ("MQ_STALL_SAMPLES", 1),
            ("MQ_STALL_MIN_SAMPLES", 1),
            ("MQ_STALL_FLOOR_SECONDS", 0),
            ("MQ_STALL_MODEL_SECONDS", 1),
        )
        if getattr(settings, name) < least
    ]
    return [
        checks.Error(
            problem + ".",
            hint="See docs/configuration.md: e.g. MQ_STALL_WINDOW_DAYS=7, MQ_STALL_SAMPLES=1000, "
            "MQ_STALL_MIN_SAMPLES=30, MQ_STALL_FLOOR_SECONDS=900, MQ_STALL_MODEL_SECONDS=600.",
            id="mq.E095",
        )
        for problem in problems
    ]


def check_two_person(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """A kind misspelt would leave its deletions to one person (steering.twoperson)."""
    known = ("batch", "jobs", "purge")
    unknown = [k for k in settings.MQ_TWO_PERSON_DELETION if k not in known]
    problems = [f"MQ_TWO_PERSON_DELETION names {k!r}" for k in unknown]
    if settings.MQ_TWO_PERSON_EXPIRY_HOURS <= 0:
        problems.append("MQ_TWO_PERSON_EXPIRY_HOURS must be positive")
    return [
        checks.Error(
            problem,
            hint="Give any of batch, jobs, purge (comma-separated) or all; and an expiry in "
            "hours, e.g. 72.",
            id="mq.E140",
        )
        for problem in problems
    ]


ALL_CHECKS = [
    check_zk_hosts,
    check_zk_chroot,
    check_zk_timeout,
    check_redis_url,
    check_redis_sentinel,
    check_disk_threshold,
    check_replace_share,
    check_work_dir,
    check_lock_stale_seconds,
    check_reconcile_seconds,
    check_services,
    check_ezid,
    check_secret_key,
    check_chain,
    check_worker_beat,
    check_lanes,
    check_window_check_seconds,
    check_container_paths,
    check_capacity,
    check_download_limits,
    check_notify,
    check_workers,
    check_display_time_zone,
    check_metrics_allow,
    check_metrics_dir,
    check_request_limit,
    check_proxy_ssl_header,
    check_web_zk_wait,
    check_step_cut_off,
    check_content_base_url,
    check_local_id_service,
    check_stall_settings,
    check_var_dir,
    check_index_dirs,
    check_two_person,
]


def register() -> None:
    for check in ALL_CHECKS:
        checks.register(check, TAG)
    checks.register(check_merritt_api_profiles, TAG, checks.Tags.database)
    checks.register(check_profile_owner_arks, TAG, checks.Tags.database)
