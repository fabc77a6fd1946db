"""``/healthz``: whether ZooKeeper and Redis answer, and how full the tree is."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from kazoo.exceptions import KazooException
from redis.exceptions import RedisError

from ..core import indexdirs, retention
from ..core.errors import QueueError
from .runtime import get_store, redis_within

REDIS_PING_SECONDS = 5.0


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when ZooKeeper and Redis both answer, else 503 naming the one that does not.

    ``capacity.warning`` turns true from 80 % of MQ_MAX_QUEUE_JOBS: the queue still works,
    but will soon refuse submissions until ``cleanup`` purges finished jobs.
    ``index_dirs.warning`` turns true when an index directory's listing passes 70 % of
    MQ_ZK_MAXBUFFER, past which Merritt's Java services could no longer list it.
    """
    from pipeline.capacity import usage  # a Django app's module; this one loads with the URLs

    body: dict = {}
    try:
        store = get_store(init=False, connected_within=settings.ZK_TIMEOUT)
        body["capacity"] = usage(store.jobs.job_count())
        body["index_dirs"] = index_dirs(store)
        body["zookeeper"] = {"ok": True}
    except (QueueError, KazooException) as e:
        body["zookeeper"] = {"ok": False, "error": f"ZooKeeper is down: {e}"}
    redis = redis_within(REDIS_PING_SECONDS)
    try:
        redis.ping()
        body["redis"] = {"ok": True}
    except (RedisError, OSError) as e:
        body["redis"] = {"ok": False, "error": f"Redis is down: {type(e).__name__}: {e}"}
    finally:
        redis.close()
    body["ok"] = body["zookeeper"]["ok"] and body["redis"]["ok"]
    return JsonResponse(body, status=200 if body["ok"] else 503)


# The directories named in the answer, largest first: the ones to watch.
LARGEST_SHOWN = 3


def index_dirs(store) -> dict:
    limit = settings.MQ_ZK_MAXBUFFER
    sizes = sorted(
        indexdirs.measure(store.client, limit, timeout=settings.ZK_TIMEOUT),
        key=lambda s: s.bytes,
        reverse=True,
    )
    return {
        "limit": limit,
        "warning": any(s.warning for s in sizes),
        "largest": [s.as_dict() for s in sizes[:LARGEST_SHOWN]],
        "warnings": retention.warnings(sizes),
    }
