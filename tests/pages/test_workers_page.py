"""The Workers page and draining a worker.

Real worker processes (``tests.cluster``: ``manage.py rqworker`` and ``run_dispatcher`` on the
test's ZooKeeper chroot and Redis) seen through the page in Chromium: what each runs, a
worker gone silent and what became of its job, a drained worker finishing its step and taking
no more. The role tests and the worker class's drain in burst mode need no browser.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from rq import Queue

from merritt_queue.core import workerfacts
from merritt_queue.core.queues import ADMIN_QUEUE
from merritt_queue.core.tree import job_node
from merritt_queue.core.worker import QueueWorker
from steering.models import DEPOSITOR, OPERATOR, AdminAction, CollectionScope
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture
from tests.cluster import only_job, wait_for

pytest_plugins = ["tests.cluster", "tests.httpserver"]


def person(name: str, group: str) -> User:
    user = User.objects.create_user(name, password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


# --- who may see and drain ------------------------------------------------------------------


def test_a_depositor_can_neither_see_the_workers_page_nor_drain(client, db, redis):
    client.force_login(person("dee", DEPOSITOR))
    assert client.get("/workers/").status_code == 403
    assert 'href="/workers/"' not in client.get("/").content.decode()
    workerfacts.write(redis, workerfacts.Record("w1", host="h", pid=1, beat=time.time()))
    refused = client.get("/actions/worker.drain/confirm?ids=w1")
    assert refused.status_code == 403
    assert "Drain needs the operator role" in refused.content.decode()
    assert not workerfacts.drained(redis, "w1")


def test_an_operator_sees_the_page_from_the_nav(client, db, redis):
    client.force_login(person("otto", OPERATOR))
    assert 'href="/workers/"' in client.get("/").content.decode()
    workerfacts.write(redis, workerfacts.Record("w1", host="hostA", pid=41, beat=time.time()))
    page = client.get("/workers/").content.decode()
    assert 'data-worker="w1"' in page and "hostA" in page and "pid 41" in page


def test_an_operator_of_some_collections_drains_no_worker(client, db, redis):
    """A worker runs every collection's jobs: draining it is for operators of all of them
    (an operator reads every collection, so the page itself is the same)."""
    user = person("scoped", OPERATOR)
    CollectionScope.objects.create(user=user, collections=["mine"])
    workerfacts.write(redis, workerfacts.Record("w1", host="h", pid=1, beat=time.time()))
    client.force_login(user)
    assert client.get("/workers/").status_code == 200
    confirm = client.get("/actions/worker.drain/confirm?ids=w1").content.decode()
    assert "your role covers only some" in confirm
    assert "confirm-form" not in confirm


def test_the_page_costs_the_same_queries_for_three_workers_or_thirty(
    client, db, redis, django_assert_max_num_queries
):
    client.force_login(person("otto", OPERATOR))
    client.get("/workers/")  # the session and the person, read once
    counts = []
    for n in (3, 30):
        for i in range(n):
            workerfacts.write(redis, workerfacts.Record(f"w{i}", host="h", pid=i, beat=time.time()))
        with django_assert_max_num_queries(8) as queries:
            page = client.get("/workers/").content.decode()
        assert page.count('class="card worker') == n
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_a_worker_rq_no_longer_knows_is_gone_and_cannot_be_drained(client, db, redis):
    client.force_login(person("otto", OPERATOR))
    record = workerfacts.Record("w-old", host="h", pid=7, beat=time.time() - 3600)
    workerfacts.write(redis, record)
    redis.sadd(workerfacts.RQ_WORKERS, "rq:worker:w-live")
    redis.hset("rq:worker:w-live", mapping={"hostname": "h2", "pid": 8, "state": "idle"})
    workerfacts.write(redis, workerfacts.Record("w-live", host="h2", pid=8, beat=time.time()))
    page = client.get("/workers/").content.decode()
    gone = page.split('data-worker="w-old"')[1]
    assert ">gone<" in gone and "action-workerdrain" not in gone
    live = page.split('data-worker="w-live"')[1].split('data-worker="w-old"')[0]
    assert ">idle<" in live and "action-workerdrain" in live
    assert page.index('data-worker="w-live"') < page.index('data-worker="w-old"')


def test_a_silence_bound_within_two_beats_fails_its_check(settings):
    from merritt_queue.project import checks

    assert checks.check_worker_beat() == []
    settings.MQ_WORKER_SILENT_SECONDS = settings.MQ_WORKER_BEAT_SECONDS * 1.5
    assert [m.id for m in checks.check_worker_beat()] == ["mq.E090"]


# --- the worker class obeys the flag ----------------------------------------------------------


def test_a_drained_worker_takes_no_job_until_undrained(redis):
    queue = Queue(ADMIN_QUEUE, connection=redis)
    job = queue.enqueue_call("operator.add", args=(1, 1), result_ttl=60)
    worker = QueueWorker([queue], connection=redis)
    workerfacts.drain(redis, worker.name, "tester", "host maintenance")
    assert worker.work(burst=True) is False
    assert queue.job_ids == [job.id]
    assert workerfacts.undrain(redis, worker.name)
    worker._drain_known = (True, 0.0)  # as if last read long ago
    assert worker.work(burst=True) is True
    assert queue.job_ids == []


def test_a_job_taken_as_the_drain_began_goes_back_to_the_front_of_its_queue(redis):
    queue = Queue(ADMIN_QUEUE, connection=redis)
    first = queue.enqueue_call("operator.add", args=(1, 1))
    second = queue.enqueue_call("operator.add", args=(2, 2))
    worker = QueueWorker([queue], connection=redis)
    worker.register_birth()
    taken = worker.queue_class.dequeue_any([queue], None, connection=redis)
    worker._give_back(*taken)
    assert queue.job_ids == [first.id, second.id]
    assert redis.llen(queue.intermediate_queue_key) == 0
    worker.register_death()


# --- real workers, seen in the browser ----------------------------------------------------------


class Stall:
    """A payload whose first download sends half, then waits until released."""

    def __init__(self, http_server, path: str, size: int = 2 << 20):
        self.data = b"x" * size
        self.gets = 0
        self.released = threading.Event()
        self.stopping = http_server.stopping
        self.url = http_server.behave(path, generate=(size, self._chunks))

    def _chunks(self):
        self.gets += 1
        half = len(self.data) // 2
        yield self.data[:half]
        if self.gets == 1:
            while not (self.released.is_set() or self.stopping.is_set()):
                self.released.wait(0.1)
        yield self.data[half:]


@pytest.fixture
def operator_page(browser, live_server, transactional_db):  # noqa: F811 - the imported fixture
    person("opal", OPERATOR)
    page = logged_in(browser, live_server.url, "opal")
    yield page
    page.context.close()


def record_of(redis, pid: int) -> workerfacts.Record | None:
    return next((r for r in workerfacts.read(redis).records.values() if r.pid == pid), None)


SHOTS = Path("/tmp/shots-workers")


def shoot(page, url: str, name: str) -> None:
    """The page at desktop and phone widths, for a person to look at."""
    SHOTS.mkdir(exist_ok=True)
    for width, height in ((1400, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{url}/workers/")
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1366, "height": 900})


def reach(store, jid: str, status: str, cluster, timeout: float = 60, why=lambda: "") -> None:
    seen = []

    def there() -> bool:
        seen[:] = [store.jobs.get_job(jid)]
        return seen[0].status == status

    try:
        wait_for(f"job {jid} to reach {status}", there, cluster, timeout=timeout)
    except AssertionError as e:
        job = seen[0]
        left = f"{jid} is {job.status}, locked {job.locked}: {job.message}; {why()}"
        raise AssertionError(f"{left}\n{e}") from e


def card(page, url: str, name: str) -> str:
    page.goto(f"{url}/workers/")
    return page.locator(f'[data-worker="{name}"]').inner_text()


def card_says(page, url: str, name: str, *words: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = card(page, url, name) if page.locator("body").count() else ""
        if all(w in text for w in words):
            return text
        time.sleep(0.5)
    raise AssertionError(f"worker {name}'s card never said {words}: {text}")


@pytest.mark.faults
def test_the_workers_page_follows_real_workers_through_silence_and_a_drain(
    operator_page, live_server, cluster, store, process_store, redis, http_server, settings
):
    settings.MQ_WORKER_SILENT_SECONDS = 4
    page, url = operator_page, live_server.url
    first, second = Stall(http_server, "/first.bin"), Stall(http_server, "/second.bin")
    fast = {"MQ_WORKER_BEAT_SECONDS": "1"}
    try:
        a = cluster.worker("worker-a", **fast)
        cluster.dispatcher()
        bid = cluster.submit(type="file", payload_url=first.url)
        wait_for("worker a to start", lambda: record_of(redis, a.pid), cluster, timeout=60)
        b = cluster.worker("worker-b", **fast)
        name_a = record_of(redis, a.pid).name
        name_b = wait_for("worker b to start", lambda: record_of(redis, b.pid), cluster).name

        # Worker a is inside the first job's download: the page names the job and its bytes.
        job = wait_for("the first download", lambda: only_job(store, bid), cluster, timeout=60)
        text = card_says(page, url, name_a, "busy", job.jid, "Downloading", "so far")
        assert "1.0 MB so far" in text or "MB so far" in text, text
        assert "busy" not in card(page, url, name_b)
        assert "sweeping" in page.locator(".dispatcher-health").inner_text()

        # Stopped: silent, then its ZooKeeper session ends, the lock vanishes, and worker b
        # runs the job again.
        a.send_signal(signal.SIGSTOP)
        text = card_says(page, url, name_a, "silent", job.jid)
        first.released.set()
        reach(store, job.jid, "Completed", cluster)
        text = card_says(page, url, name_a, "silent", "lock vanished", "now Completed")
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)

        # Worker b drained inside the second job's download: it finishes that step and takes
        # no more, the job waits in Processing; undrained, it goes on.
        bid2 = cluster.submit(type="file", payload_url=second.url)
        job2 = wait_for("the second download", lambda: only_job(store, bid2), cluster)
        card_says(page, url, name_b, "busy", job2.jid, "Downloading")
        seen = [(r.method, r.headers) for r in http_server.requests_for("/second.bin")]
        assert store.jobs.get_job(job2.jid).status == "Downloading", (second.gets, seen)
        page.click(f'[data-worker="{name_b}"] a.action-workerdrain')
        page.wait_for_selector("[data-confirm-open]")
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "drain-confirm.png"), full_page=True)
        page.fill("textarea#reason", "moving to a new host")
        page.click("form.confirm-form button[type=submit]")
        page.wait_for_url(re.compile(r"/actions/\d+/(\?next=.*)?$"))
        card_says(page, url, name_b, "draining", job2.jid, "moving to a new host")
        second.released.set()
        reach(
            store,
            job2.jid,
            "Processing",
            cluster,
            why=lambda: (
                [(r.method, r.path) for r in http_server.requests],
                second.gets,
                cluster.pids(),
                store.client.get(job_node(job2.jid, "history"))[0][-2500:],
            ),
        )
        time.sleep(3)  # several chances to take the Processing step, none taken
        left = store.jobs.get_job(job2.jid)
        assert (left.status, left.locked) == ("Processing", False), cluster.logs()
        card_says(page, url, name_b, "drained", "nothing: drained")
        assert "(in mq-express-processing)" in page.locator(".queue-wait").inner_text()
        shoot(page, url, "drained")
        record = AdminAction.objects.get(action="worker.drain")
        assert (record.reason, record.done) == ("moving to a new host", 1)
        assert list(record.items.values_list("item_id", flat=True)) == [name_b]

        page.goto(f"{url}/workers/")
        page.click(f'[data-worker="{name_b}"] a.action-workerundrain')
        page.wait_for_selector("[data-confirm-open]")
        page.fill("textarea#reason", "maintenance over")
        page.click("form.confirm-form button[type=submit]")
        page.wait_for_url(re.compile(r"/actions/\d+/(\?next=.*)?$"))
        reach(store, job2.jid, "Completed", cluster)
        text = card_says(page, url, name_b, "idle")
        assert re.search(r"[1-9]\d* steps? done", text), text

        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{url}/workers/")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert page.locator(f'[data-worker="{name_b}"]').is_visible()
    finally:
        first.released.set()
        second.released.set()
