"""``/healthz``: whether ZooKeeper and Redis answer, and how full the tree is."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django_rq.connection_utils import get_redis_connection
from kazoo.exceptions import KazooException
from redis.exceptions import RedisError

from ..core.errors import QueueError
from .runtime import get_store

# A Redis that accepts the connection but never answers must not hold the probe.
REDIS_PING_SECONDS = 5.0


def _redis():
    """A connection to the workers' Redis, read from the settings at each call."""
    conn = get_redis_connection(settings.RQ_QUEUES["default"])
    conn.connection_pool.connection_kwargs.update(
        socket_connect_timeout=REDIS_PING_SECONDS, socket_timeout=REDIS_PING_SECONDS
    )
    return conn


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when ZooKeeper and Redis both answer, else 503 naming the one that does not.

    ``capacity.warning`` turns true from 80 % of MQ_MAX_QUEUE_JOBS: the queue still works,
    but will soon refuse submissions until ``cleanup`` purges finished jobs.
    """
    from batches.capacity import usage  # a Django app's module; this one loads with the URLs

    body: dict = {}
    try:
        store = get_store(init=False, connected_within=settings.ZK_TIMEOUT)
        body["capacity"] = usage(store.job_count())
        body["zookeeper"] = {"ok": True}
    except (QueueError, KazooException) as e:
        body["zookeeper"] = {"ok": False, "error": f"ZooKeeper is down: {e}"}
    redis = _redis()
    try:
        redis.ping()
        body["redis"] = {"ok": True}
    except (RedisError, OSError) as e:
        body["redis"] = {"ok": False, "error": f"Redis is down: {type(e).__name__}: {e}"}
    finally:
        redis.close()
    body["ok"] = body["zookeeper"]["ok"] and body["redis"]["ok"]
    return JsonResponse(body, status=200 if body["ok"] else 503)
