"""Settings read from environment variables; every default runs on one machine with SQLite."""

import os
from pathlib import Path

import dj_database_url

from ..core.queues import all_queue_names
from . import vardir
from .env import (
    DEV_SECRET_KEY,
    env_bool,
    env_float,
    env_host_ports,
    env_int,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parents[2]
# The project's own templates and static files travel inside the package, so that an
# installed wheel has them as a checkout does.
PROJECT_DIR = Path(__file__).resolve().parent
# Every file the queue writes of its own lies under MQ_VAR_DIR unless its own setting puts it
# elsewhere. A checkout's default is its var/; an installed wheel's would lie inside
# site-packages, where nothing is created and check mq.E100 refuses to start (vardir.py).
VAR_DIR = Path(env_str("MQ_VAR_DIR", str(BASE_DIR / "var")))

SECRET_KEY = env_str("SECRET_KEY", DEV_SECRET_KEY)
# Off unless asked for (`make demo` and the tests turn it on): its error pages show settings.
DEBUG = env_bool("DEBUG", False)
# Error reports (the DEBUG page, mailed reports) mask credentials inside URLs.
DEFAULT_EXCEPTION_REPORTER_FILTER = "merritt_queue.project.reporting.MaskingReporterFilter"
ALLOWED_HOSTS = [h.strip() for h in env_str("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")]
ALLOWED_HOSTS = [h for h in ALLOWED_HOSTS if h]
READ_ONLY = env_bool("READ_ONLY", False)

# Django's deployment checklist (`manage.py check --deploy`): with DEBUG off every default is
# the secure one, for a site served over https behind a proxy that terminates TLS; a host
# served over plain http (the tests' servers) turns them off by name.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
# The probes answer over plain http too: a monitor or Prometheus on the host asks gunicorn
# directly, where no proxy says the request came over https.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
# The header by which the TLS-terminating proxy says a request came over https, with the
# value "https" (e.g. X-Forwarded-Proto); the proxy must set it on every request, replacing
# the client's. Empty: only a request that reached this process over TLS counts as secure.
SECURE_PROXY_SSL_HEADER_NAME = env_str("SECURE_PROXY_SSL_HEADER", "").strip()
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + SECURE_PROXY_SSL_HEADER_NAME.upper().replace("-", "_"), "https")
    if SECURE_PROXY_SSL_HEADER_NAME
    else None
)

ZK_HOSTS = env_str("ZK_HOSTS", "127.0.0.1:2181")
ZK_CHROOT = env_str("ZK_CHROOT", "/merritt")
ZK_TIMEOUT = env_float("ZK_TIMEOUT", 10.0)
# How long a step whose worker is cut off from ZooKeeper waits for its session to come back
# before it gives up (it starts no new side effect meanwhile). By default the session
# timeout: past it, the session is gone at the server and another worker may hold the job.
MQ_STEP_CUT_OFF_SECONDS = env_float("MQ_STEP_CUT_OFF_SECONDS", ZK_TIMEOUT)
# The most a web request waits for ZooKeeper while it is unreachable, counted from the
# request's start; then the request fails, and what it asked of ZooKeeper is not sent later.
MQ_WEB_ZK_WAIT = env_float("MQ_WEB_ZK_WAIT", 5.0)

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
# Both set is a contradiction that check mq.E010 reports, rather than a silent preference.
REDIS_URL_IS_SET = "REDIS_URL" in os.environ
# A Sentinel-managed Redis: the Sentinels name the current master of REDIS_SENTINEL_MASTER,
# and every connection (workers, dispatcher, web) follows it through a failover.
REDIS_SENTINELS = env_host_ports("REDIS_SENTINELS")
REDIS_SENTINEL_MASTER = env_str("REDIS_SENTINEL_MASTER", "")
REDIS_SENTINEL_DB = env_int("REDIS_SENTINEL_DB", 0)
REDIS_PASSWORD = env_str("REDIS_PASSWORD", "")
REDIS_SENTINEL_PASSWORD = env_str("REDIS_SENTINEL_PASSWORD", "")
if REDIS_SENTINELS:
    REDIS_CONNECTION = {
        "SENTINELS": REDIS_SENTINELS,
        "MASTER_NAME": REDIS_SENTINEL_MASTER,
        "DB": REDIS_SENTINEL_DB,
        "PASSWORD": REDIS_PASSWORD or None,
        "SENTINEL_KWARGS": {"password": REDIS_SENTINEL_PASSWORD or None},
    }
else:
    REDIS_CONNECTION = {"URL": REDIS_URL}
# One queue per state (see merritt_queue.core.queues); all on the same Redis.
RQ_QUEUES = {
    name: {**REDIS_CONNECTION, "DEFAULT_TIMEOUT": 3600} for name in ["default", *all_queue_names()]
}
# No COMMIT_MODE: it governs only django-rq's own queues, and nothing here enqueues through
# them. The dispatcher's plain rq.Queue enqueues follow ZooKeeper, not a database row, and a
# bulk admin action's row is committed (steering.actions.execution._start) before its job is queued.
RQ = {
    # No fork per job (a worker process keeps one ZooKeeper session instead of one per job),
    # and a Redis outage does not end the worker.
    "WORKER_CLASS": "merritt_queue.project.tasks.Worker",
}

MQ_WORK_DIR = env_str("MQ_WORK_DIR", str(VAR_DIR / "work"))
MQ_DISK_THRESHOLD = env_int("MQ_DISK_THRESHOLD", 80)
# A new version that deletes files, or replaces more than this share of the object's bytes,
# waits Held after Processing for a person (pipeline.review); each profile may say otherwise.
MQ_DESTRUCTIVE_REVIEW = env_bool("MQ_DESTRUCTIVE_REVIEW", False)
MQ_DESTRUCTIVE_REPLACE_SHARE = env_float("MQ_DESTRUCTIVE_REPLACE_SHARE", 0.5)
MQ_LOCK_STALE_SECONDS = env_int("MQ_LOCK_STALE_SECONDS", 3600)
MQ_PROVISION_RETRY_SECONDS = env_float("MQ_PROVISION_RETRY_SECONDS", 30.0)
# Stalled jobs (jobs.stalls): each state's step time is learned from the finished steps of
# the last MQ_STALL_WINDOW_DAYS, at most MQ_STALL_SAMPLES a state, relearned every
# MQ_STALL_MODEL_SECONDS; a state with fewer than MQ_STALL_MIN_SAMPLES flags nothing, and no
# job is flagged before MQ_STALL_FLOOR_SECONDS in its state.
MQ_STALL_WINDOW_DAYS = env_int("MQ_STALL_WINDOW_DAYS", 7)
MQ_STALL_SAMPLES = env_int("MQ_STALL_SAMPLES", 1000)
MQ_STALL_MIN_SAMPLES = env_int("MQ_STALL_MIN_SAMPLES", 30)
MQ_STALL_FLOOR_SECONDS = env_float("MQ_STALL_FLOOR_SECONDS", 900.0)
MQ_STALL_MODEL_SECONDS = env_float("MQ_STALL_MODEL_SECONDS", 600.0)
# A reported batch keeps its lock this long after its last write, so that MerrittZK's
# reporter, which reads a batch's status before it locks it, cannot report it again.
MQ_REPORT_LOCK_GRACE = env_float("MQ_REPORT_LOCK_GRACE", 2.0)

# Ingest limits and the network policy of downloads and callbacks.
MQ_MAX_UPLOAD_BYTES = env_int("MQ_MAX_UPLOAD_BYTES", 2 * 1024**3)
# The most any other request's body may hold (a form, the admin, a login), refused unread
# past it: above Django's DATA_UPLOAD_MAX_MEMORY_SIZE, so that every form Django accepts passes.
MQ_MAX_REQUEST_BYTES = env_int("MQ_MAX_REQUEST_BYTES", 4 * 1024**2)
MQ_MAX_MANIFEST_BYTES = env_int("MQ_MAX_MANIFEST_BYTES", 10 * 1024**2)
MQ_MAX_CONTAINER_BYTES = env_int("MQ_MAX_CONTAINER_BYTES", 100 * 1024**3)
# Deepest and longest entry path a container may hold: deeper or longer ones are refused by
# name on the archive's listing instead of failing on the file system's own limits later
# (the path is rebuilt under the work directory and the storage root).
MQ_CONTAINER_MAX_DEPTH = env_int("MQ_CONTAINER_MAX_DEPTH", 32)
MQ_CONTAINER_MAX_PATH_BYTES = env_int("MQ_CONTAINER_MAX_PATH_BYTES", 1024)
# Capacity: ZooKeeper keeps the whole tree in its heap, so the jobs a submission may add are
# bounded per batch, per collection and for the whole tree (any status, until `cleanup` purges
# them); scripts/services.sh sizes ZooKeeper's heap from MQ_MAX_QUEUE_JOBS.
MQ_MAX_BATCH_JOBS = env_int("MQ_MAX_BATCH_JOBS", 10_000)
MQ_MAX_COLLECTION_JOBS = env_int("MQ_MAX_COLLECTION_JOBS", 10_000)
MQ_MAX_QUEUE_JOBS = env_int("MQ_MAX_QUEUE_JOBS", 25_000)
# The frame a Java ZooKeeper client reads at most (its jute.maxbuffer): an index directory whose
# listing passes it cannot be listed by Merritt's Java services (merritt_queue.core.indexdirs).
MQ_ZK_MAXBUFFER = env_int("MQ_ZK_MAXBUFFER", 0xFFFFF)
# The dispatcher removes finished batches and Deleted jobs by itself (merritt_queue.core.retention).
MQ_CLEANUP_AUTO = env_bool("MQ_CLEANUP_AUTO", True)
MQ_CLEANUP_RETENTION_DAYS = env_float("MQ_CLEANUP_RETENTION_DAYS", 30.0)
MQ_FETCH_TIMEOUT = env_float("MQ_FETCH_TIMEOUT", 30.0)
MQ_FETCH_RETRIES = env_int("MQ_FETCH_RETRIES", 3)
# Wall-clock limit of one download attempt, in seconds (0: none). The read timeout applies to
# each read, so a server trickling a byte every few seconds would otherwise hold a worker
# forever; 6 hours still lets 100 GB through at 5 MB/s.
MQ_FETCH_DEADLINE = env_float("MQ_FETCH_DEADLINE", 21600.0)
MQ_CALLBACK_RETRIES = env_int("MQ_CALLBACK_RETRIES", 3)
# Depositors' notifications (the notifications app): attempts per delivery, the wait after the
# first failed one (doubling after each, up to the cap), one attempt's deadline, and how long
# an e-mail waits to gather the events that follow it into one message.
MQ_NOTIFY_ATTEMPTS = env_int("MQ_NOTIFY_ATTEMPTS", 8)
MQ_NOTIFY_BACKOFF = env_float("MQ_NOTIFY_BACKOFF", 30.0)
MQ_NOTIFY_BACKOFF_MAX = env_float("MQ_NOTIFY_BACKOFF_MAX", 3600.0)
MQ_NOTIFY_TIMEOUT = env_float("MQ_NOTIFY_TIMEOUT", 10.0)
MQ_NOTIFY_MAIL_GATHER = env_float("MQ_NOTIFY_MAIL_GATHER", 60.0)
# How many manifests one user may have checked a minute (the page, the API and linked
# manifests submitted, together; 0: no limit), counted in Django's cache.
MQ_MANIFEST_CHECKS_PER_MINUTE = env_int("MQ_MANIFEST_CHECKS_PER_MINUTE", 30)
# The pre-flight summary (batches.preflight): how many of a manifest's URLs it asks for their
# size (HEAD), and the seconds all of them may take together (0 for either: none asked).
MQ_PREFLIGHT_HEAD_SAMPLE = env_int("MQ_PREFLIGHT_HEAD_SAMPLE", 20)
MQ_PREFLIGHT_SECONDS = env_float("MQ_PREFLIGHT_SECONDS", 10.0)
# A download whose size nobody declared (manifest, HEAD): what Estimating reserves for it and
# how far it may grow, bounded by the working disk's share under MQ_DISK_THRESHOLD
# (deposit.reserve). The same figure as MQ_MAX_CONTAINER_BYTES, the most an unknown
# container may unpack to; 0: the disk's share.
MQ_MAX_DOWNLOAD_BYTES = env_int("MQ_MAX_DOWNLOAD_BYTES", 100 * 1024**3)
# Downloads in flight per remote host across all workers, so that one depositor's slow
# server cannot hold every worker (0: no bound), and how long a job that found its host
# full waits in Downloading before it tries again.
MQ_MAX_DOWNLOADS_PER_HOST = env_int("MQ_MAX_DOWNLOADS_PER_HOST", 2)
MQ_HOST_WAIT_SECONDS = env_float("MQ_HOST_WAIT_SECONDS", 15.0)
# Downloads from loopback or private addresses are refused unless allowed (the demo allows
# loopback).
MQ_ALLOW_LOOPBACK = env_bool("MQ_ALLOW_LOOPBACK", False)
MQ_ALLOW_PRIVATE = env_bool("MQ_ALLOW_PRIVATE", False)

# Services: local defaults, Merritt/EZID over HTTP at scale.
MQ_MINTER = env_str("MQ_MINTER", "local")
MQ_MINTER_DIR = env_str("MQ_MINTER_DIR", str(VAR_DIR / "minter"))
EZID_URL = env_str("EZID_URL", "https://ezid.cdlib.org")
EZID_USER = env_str("EZID_USER", "")
EZID_PASSWORD = env_str("EZID_PASSWORD", "")
# Where an ARK minted or updated through EZID resolves: {ark} is the ARK, percent-encoded
# (Merritt's ingest: its target host, then /m/). Empty: EZID's target is left as it is.
MQ_EZID_TARGET_PATTERN = env_str("MQ_EZID_TARGET_PATTERN", "https://merritt.cdlib.org/m/{ark}")
# How long Processing waits before telling EZID again when EZID could not be reached.
MQ_EZID_RETRY_SECONDS = env_float("MQ_EZID_RETRY_SECONDS", 60.0)
# Circuit breakers (merritt_queue/services/breakers.py): this many transient failures in a
# row of one dependency (EZID, storage, inventory, SMTP, a webhook or content host) open its
# breaker, and the jobs that need it wait; 0 turns the breakers off. An open breaker lets one
# probe through after the cool-off.
MQ_BREAKER_THRESHOLD = env_int("MQ_BREAKER_THRESHOLD", 5)
MQ_BREAKER_COOL_OFF_SECONDS = env_float("MQ_BREAKER_COOL_OFF_SECONDS", 300.0)
# Who does Storing and Recording (merritt_queue/core/stepowners.py): local, merritt-queue
# or merritt-api; a profile may name its own.
MQ_STORE_RECORD = env_str("MQ_STORE_RECORD", "local")
MQ_STORAGE = env_str("MQ_STORAGE", "local")
MQ_STORAGE_ROOT = env_str("MQ_STORAGE_ROOT", str(VAR_DIR / "storage"))
MERRITT_STORAGE_URL = env_str("MERRITT_STORAGE_URL", "")
MERRITT_STORAGE_NODE = env_str("MERRITT_STORAGE_NODE", "")
# Merritt storage fetches each file itself: the URL at which MQ_WORK_DIR is served to it
# (e.g. https://ingest.example.org/work/). Needed when MQ_STORAGE is merritt.
MERRITT_STORAGE_FILE_URL = env_str("MERRITT_STORAGE_FILE_URL", "")
# merritt-api mode: Merritt's inventory service (its context root; we POST {url}/add), how
# long one add may take (inventory reads storage's manifest of the whole object), and how
# long Recording waits before adding again when inventory could not be reached.
MERRITT_INVENTORY_URL = env_str("MERRITT_INVENTORY_URL", "")
MERRITT_INVENTORY_TIMEOUT = env_float("MERRITT_INVENTORY_TIMEOUT", 300.0)
MERRITT_INVENTORY_RETRY_SECONDS = env_float("MERRITT_INVENTORY_RETRY_SECONDS", 60.0)
# merritt-queue mode: how long Notify waits before reading again what Merritt storage
# stored of a job, when storage could not be reached.
MERRITT_STORAGE_RETRY_SECONDS = env_float("MERRITT_STORAGE_RETRY_SECONDS", 60.0)
# Where Merritt storage reaches this project's web tier for a merritt-queue job's signed
# add-manifest and files (pipeline/contentlinks.py): http(s) only, e.g. https://queue.example.org.
MQ_CONTENT_BASE_URL = env_str("MQ_CONTENT_BASE_URL", "")
# How long such a signed URL opens its file (seconds); a recorded job's are refused anyway.
MQ_CONTENT_URL_MAX_AGE = env_int("MQ_CONTENT_URL_MAX_AGE", 14 * 24 * 3600)

# Dispatcher: how many RQ jobs may wait per state, and the safety-net sweep period.
MQ_DISPATCH_AHEAD = env_int("MQ_DISPATCH_AHEAD", 20)
# An admin action on more items than this runs as an RQ job on the mq-admin queue (the
# result page shows its progress); up to this many it runs inside the request.
MQ_BULK_INLINE_MAX = env_int("MQ_BULK_INLINE_MAX", 200)
# An "all matching" hold, release, resume or delete of more jobs than this is summarised on
# its confirmation page and read again from the mirror at run time, MQ_BULK_CHUNK at a time
# (steering.actions.wholefilter).
MQ_BULK_LIST_MAX = env_int("MQ_BULK_LIST_MAX", 1000)
MQ_BULK_CHUNK = env_int("MQ_BULK_CHUNK", 500)
MQ_SWEEP_SECONDS = env_float("MQ_SWEEP_SECONDS", 10.0)
MQ_WINDOW_CHECK_SECONDS = env_float("MQ_WINDOW_CHECK_SECONDS", 30.0)
# A Failed job that failed this many times with one cause is quarantined (ui.quarantine):
# left out of bulk resumes unless a person names it with a reason.
MQ_POISON_FAILURES = env_int("MQ_POISON_FAILURES", 3)
# A resume run (steering.runs) stops itself when more than this share of its resumed jobs
# that finished failed again with one cause, once at least MQ_RESUME_STOP_MIN finished.
MQ_RESUME_STOP_SHARE = env_float("MQ_RESUME_STOP_SHARE", 0.5)
MQ_RESUME_STOP_MIN = env_int("MQ_RESUME_STOP_MIN", 10)
# The most jobs a resume run resumes in one slice (one tick of the dispatcher).
MQ_RESUME_SLICE = env_int("MQ_RESUME_SLICE", 100)
# Which deletions one administrator requests and another approves (steering.twoperson): any
# of batch, jobs, purge (comma-separated), or all; empty (the default) for none.
MQ_TWO_PERSON_DELETION = [
    kind.strip()
    for kind in env_str("MQ_TWO_PERSON_DELETION", "").replace("all", "batch,jobs,purge").split(",")
    if kind.strip()
]
# A request not decided within this many hours expires: it can no longer be approved.
MQ_TWO_PERSON_EXPIRY_HOURS = env_float("MQ_TWO_PERSON_EXPIRY_HOURS", 72.0)
# What this project's workers take when Merritt's own ingest may share the ensemble
# (merritt_queue/core/sides.py): all, own (only batches submitted here) or none (no workers).
MQ_WORKERS = env_str("MQ_WORKERS", "all")
# An RQ job "started" this many seconds ago whose item holds no ZooKeeper lock is taken as
# dead (its worker was killed) and enqueued again; a needless repeat is harmless.
MQ_STARTED_GRACE_SECONDS = env_float("MQ_STARTED_GRACE_SECONDS", 60.0)
# A worker that finishes a job's step goes on with the job's next steps under the same lock,
# without a round through the dispatcher and Redis, while it serves the next state's queue:
# at most MQ_CHAIN_STEPS steps per RQ job (1: one step each), starting no new step after
# MQ_CHAIN_SECONDS. A larger budget saves more per step; a smaller one lets a later
# high-priority job start sooner.
MQ_CHAIN_STEPS = env_int("MQ_CHAIN_STEPS", 8)
MQ_CHAIN_SECONDS = env_float("MQ_CHAIN_SECONDS", 30.0)
# The express lane (merritt_queue/core/lanes.py): a job's steps go to queues of their own,
# served first by every worker and by the reserved workers, when its priority is
# MQ_URGENT_PRIORITY or lower (a lower number is more urgent; -1: none) or, from Provisioning
# on, when Estimating found it needs fewer than MQ_SMALL_JOB_BYTES (0: none). The Workers
# page warns when fewer than MQ_RESERVED_WORKERS reserved workers are alive.
MQ_SMALL_JOB_BYTES = env_int("MQ_SMALL_JOB_BYTES", 50_000_000)
MQ_URGENT_PRIORITY = env_int("MQ_URGENT_PRIORITY", 0)
MQ_RESERVED_WORKERS = env_int("MQ_RESERVED_WORKERS", 1)
# How often a worker says it is alive (idle or busy), and how long without a word the Workers
# page calls it silent.
MQ_WORKER_BEAT_SECONDS = env_float("MQ_WORKER_BEAT_SECONDS", 10.0)
MQ_WORKER_SILENT_SECONDS = env_float("MQ_WORKER_SILENT_SECONDS", 60.0)
# Whoever makes work whose next step is known enqueues it at once (merritt_queue.core.handover)
# instead of waiting for the dispatcher to hear of it; off, the dispatcher alone enqueues.
MQ_HANDOVER = env_bool("MQ_HANDOVER", True)
# A worker's writes reach the mirror together, in one transaction, at the end of its RQ job
# or once the first has waited MQ_MIRROR_DELAY seconds, whichever is sooner (0: each write
# at once, a transaction each). The mirror then lags ZooKeeper by at most this much while a
# worker carries a job through its steps.
MQ_MIRROR_DELAY = env_float("MQ_MIRROR_DELAY", 1.0)

# The Django mirror: every write made through the core in a Django process is copied to it at
# once (write-through); `manage.py reconcile --watch` follows writes made elsewhere and rebuilds
# the whole mirror every MQ_RECONCILE_SECONDS as a safety net.
MQ_MIRROR_WRITE_THROUGH = env_bool("MQ_MIRROR_WRITE_THROUGH", True)
MQ_RECONCILE_SECONDS = env_float("MQ_RECONCILE_SECONDS", 300.0)

# /metrics (Prometheus): the workers, the dispatcher and the web app each count what they do in
# files of MQ_METRICS_DIR, which /metrics sums; every process of a host must name the same
# directory, and it is emptied only when all of them are stopped (docs/metrics.md).
# prometheus_client reads it from PROMETHEUS_MULTIPROC_DIR, which is set from it here,
# before anything imports the library.
MQ_METRICS_DIR = env_str(
    "MQ_METRICS_DIR", os.environ.get("PROMETHEUS_MULTIPROC_DIR") or str(VAR_DIR / "metrics")
)
# Not created where it cannot be (a read-only file system, inside an install): each process
# then keeps its own counts (checks mq.W071, mq.E100).
if MQ_METRICS_DIR and vardir.makedirs(MQ_METRICS_DIR):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = MQ_METRICS_DIR
# Who may read /metrics: a request bearing MQ_METRICS_TOKEN, or one from an address of
# MQ_METRICS_ALLOW (networks, comma-separated) that no proxy forwarded. None by default: a
# proxy on the same host that adds no forwarding header would make every request loopback.
MQ_METRICS_TOKEN = env_str("MQ_METRICS_TOKEN", "")
MQ_METRICS_ALLOW = env_str("MQ_METRICS_ALLOW", "")
# The most a scrape waits for ZooKeeper and for Redis, each, before it reports them down.
MQ_METRICS_TIMEOUT = env_float("MQ_METRICS_TIMEOUT", 2.0)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_rq",
    "django_tables2",
    "django_filters",
    "merritt_queue.project.apps.MerrittQueueConfig",
    "mirror",
    "batches",
    "jobs",
    "inventory",
    "dashboard",
    "steering",
    "notifications",
    "metrics",
    "ui",
    "access",
    "accessui",
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

MIDDLEWARE = [
    # Before anything can read a body: every request's is judged by its headers first.
    "merritt_queue.project.bodylimit.BodyLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Every request's wait for ZooKeeper ends at MQ_WEB_ZK_WAIT, with a page that says so.
    "merritt_queue.project.zkdeadline.ZkDeadlineMiddleware",
    # Static files with DEBUG off too, so the pages never lose their styles behind a proxy
    # that was not told to serve /static/.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "merritt_queue.project.display_zone.DisplayZoneMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # The user is known from the session cookie alone, so a submission's body can be refused
    # (UploadGuardMiddleware) before the CSRF check reads it.
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "door.middleware.UploadGuardMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # An account with no role yet is told so on every page, and whom to ask; last, so its
    # page gets every header the others add.
    "ui.no_role.NoRoleMiddleware",
]

ROOT_URLCONF = "merritt_queue.project.urls"
WSGI_APPLICATION = "merritt_queue.project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [PROJECT_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "jobs.context_processors.mirror_freshness",
                "batches.context_processors.may_submit",
                "steering.context_processors.may_maintain",
            ],
            # {{ moment|when }}: every page's one way of showing a time (ui/cells.py).
            "builtins": ["ui.templatetags.mq_time"],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
# Connections are kept between requests and RQ jobs (checked before reuse): opening one per
# job, and closing it (for SQLite, a WAL checkpoint when it was the last), cost a worker more
# than the job's own queries.
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 600),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3") and DATABASES["default"]["NAME"]:
    # SQLite creates the file but not its directory; a fresh clone has no var/.
    vardir.makedirs(Path(DATABASES["default"]["NAME"]).parent)
    # Several workers write the inventory at once: take the write lock at BEGIN and wait
    # for it, instead of failing with "database is locked" on a lock upgrade.
    # WAL lets pages read while a worker writes; synchronous=NORMAL is safe with WAL (a crash
    # may lose the last commits, which the next reconcile restores from ZooKeeper).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
# Dates Django formats itself (the admin, a datetime printed as it is) read as our pages do.
FORMAT_MODULE_PATH = ["merritt_queue.project.formats"]
# Pages show every time in this zone, with its abbreviation (project.display_zone, per
# request); the process itself, and so ZooKeeper's timestamps, the logs and the database,
# keep UTC. A misspelt zone falls back to UTC, and the system checks (mq.E060) name it.
MQ_DISPLAY_TIME_ZONE = env_str("MQ_DISPLAY_TIME_ZONE", "UTC")
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# collectstatic fills STATIC_ROOT for a deployment; until it has run, the finders still serve
# the files from each app's static/ (the project's own: merritt_queue/project/static/), so a
# forgotten step costs speed, not the page's looks.
WHITENOISE_USE_FINDERS = True
# WhiteNoise warns at every start without it; where it cannot be made, that is all it costs.
vardir.makedirs(STATIC_ROOT)

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
EMAIL_FILE_PATH = VAR_DIR / "mail"
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "merritt-queue@localhost")
