"""``/healthz``: whether ZooKeeper and Redis answer, and how full the tree is."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from kazoo.exceptions import KazooException
from redis.exceptions import RedisError

from ..core.errors import QueueError
from .runtime import get_store, redis_within

REDIS_PING_SECONDS = 5.0


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when ZooKeeper and Redis both answer, else 503 naming the one that does not.

    ``capacity.warning`` turns true from 80 % of MQ_MAX_QUEUE_JOBS: the queue still works,
    but will soon refuse submissions until ``cleanup`` purges finished jobs.
    """
    from pipeline.capacity import usage  # a Django app's module; this one loads with the URLs

    body: dict = {}
    try:
        store = get_store(init=False, connected_within=settings.ZK_TIMEOUT)
        body["capacity"] = usage(store.jobs.job_count())
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
