"""The Workers page says which workers are reserved (``core.lanes``) and warns while fewer
reserved workers are alive than the site runs (``MQ_RESERVED_WORKERS``)."""

from __future__ import annotations

import time

from django.contrib.auth.models import Group, User

from merritt_queue.core import workerfacts
from merritt_queue.core.queues import all_queue_names, reserved_queue_names
from steering.models import OPERATOR


def operator() -> User:
    user = User.objects.create_user("otto", password="pw")
    user.groups.add(Group.objects.get_or_create(name=OPERATOR)[0])
    return user


def registered(redis, name: str, queues: list[str]) -> None:
    """A live worker as RQ and its own record have it."""
    redis.sadd(workerfacts.RQ_WORKERS, f"rq:worker:{name}")
    redis.hset(f"rq:worker:{name}", mapping={"hostname": "h", "pid": 1, "state": "idle"})
    record = workerfacts.Record(name, host="h", pid=1, queues=queues, beat=time.time())
    workerfacts.write(redis, record)


def card(page: str, name: str) -> str:
    return page.split(f'data-worker="{name}"')[1].split("</section>")[0]


def test_the_page_names_the_reserved_worker_and_counts_it(client, db, redis, settings):
    settings.MQ_RESERVED_WORKERS = 1
    client.force_login(operator())
    registered(redis, "w-every", all_queue_names())
    registered(redis, "w-reserved", reserved_queue_names())
    page = client.get("/workers/").content.decode()
    reserved, every = card(page, "w-reserved"), card(page, "w-every")
    assert "worker-reserved" in reserved and "never a large job&#x27;s download" in reserved
    assert "worker-reserved" not in every and "every queue" in every
    strip = page.split('class="fact reserved-workers"')[1].split("</div>")[0]
    assert "1 of 1 alive" in strip and "short" not in strip


def test_the_page_warns_while_fewer_reserved_workers_are_alive_than_the_site_runs(
    client, db, redis, settings
):
    settings.MQ_RESERVED_WORKERS = 2
    client.force_login(operator())
    registered(redis, "w-reserved", reserved_queue_names())
    registered(redis, "w-every", all_queue_names())
    page = client.get("/workers/").content.decode()
    strip = page.split('class="fact reserved-workers"')[1].split("</div>")[0]
    assert ">short<" in strip and "1 of 2 alive" in strip and "long download" in strip


def test_a_bad_lane_setting_fails_its_check(settings):
    from merritt_queue.project import checks

    assert checks.check_lanes() == []
    for name, value in [
        ("MQ_SMALL_JOB_BYTES", -1),
        ("MQ_URGENT_PRIORITY", 100),
        ("MQ_URGENT_PRIORITY", -2),
        ("MQ_RESERVED_WORKERS", -1),
    ]:
        before = getattr(settings, name)
        setattr(settings, name, value)
        assert [m.id for m in checks.check_lanes()] == ["mq.E134"], name
        setattr(settings, name, before)
