"""Why a job or batch waits, on the pages, in the status API and in /metrics: the database's
CASE (lists' filter, /metrics) and the pure decision (cells, pages, API) agree on every row;
the place in the queue follows the dispatcher's order; the queries stay flat as rows grow;
a depositor is not told who paused or held, nor another collection's job."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches.models import ApiToken, Batch, Collection
from door.rights import grant_depositor
from jobs.models import Job, JobEvent, MirrorState
from jobs.waitfacts import measured_rate, queue_facts
from jobs.waitorder import batch_item, job_item, job_waiting
from jobs.waitquery import ANNOTATION, NOT_WAITING, batch_case, job_case
from merritt_queue.core import waiting as w
from merritt_queue.core.tree import lock_name
from metrics import collector as c
from steering.models import AdminAction, MaintenanceWindow
from tests.pages import test_pages_batches_jobs as pages
from tests.pages.test_pages_batches_jobs import bid, jid
from tests.roles import viewer

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)
# What a submission through this project writes: this site's workers take its items.
OURS = {"payload_url": "https://example.org/x", "created_by": "merritt-queue"}


def make_job(n: int, status: str = "Pending", batch: int = 1, **fields):
    fields.setdefault("configuration", {**OURS, "payload_type": "file"})
    return pages.make_job(n, status, batch, **fields)


def make_batch(n: int, status: str = "Processing", **fields):
    fields.setdefault("submission", {**OURS, "type": "file"})
    return pages.make_batch(n, status, **fields)


DISK = "waiting for disk space: the working disk would be 91% full"


@pytest.fixture
def browser(client, django_user_model):
    client.force_login(viewer(django_user_model.objects.create_user("vera")))
    return client


def pause(by_window: bool = False) -> None:
    MirrorState.objects.update_or_create(
        name="locks",
        defaults={
            "at": NOW,
            "detail": {"paused": True, "paused_at": (NOW - timedelta(minutes=5)).isoformat()},
        },
    )
    AdminAction.objects.create(
        username="alice", action="queue.pause", scope="queue", reason="storage upgrade", token="t1"
    )
    if by_window:
        window(MaintenanceWindow.QUEUE)


def window(scope: str, collection: str = "") -> MaintenanceWindow:
    return MaintenanceWindow.objects.create(
        scope=scope,
        collection=collection,
        start=NOW - timedelta(hours=1),
        end=NOW + timedelta(hours=1),
        reason="EZID downtime",
        created_by_name="alice",
        applied_start=NOW - timedelta(hours=1),
        applied_end=NOW + timedelta(hours=1),
    )


def hold(collection: str = "demo", by_window: bool = False) -> None:
    Collection.objects.update_or_create(
        mnemonic=collection,
        defaults={"held": True, "held_by": "bob", "held_reason": "checking", "held_at": NOW},
    )
    if by_window:
        window(MaintenanceWindow.COLLECTION, collection)


def storage_lock(ark: str, holder: str) -> None:
    detail = {
        "paused": False,
        "locks": [{"kind": "storage", "name": lock_name(ark), "data": holder}],
    }
    MirrorState.objects.update_or_create(name="locks", defaults={"at": NOW, "detail": detail})


def every_kind_of_row() -> None:
    """Jobs and batches of every status, message, lock and owner the rules look at."""
    messages = ["", DISK, "waiting for a download slot: h already has 2 download(s)"]
    messages += ["local id x is being resolved by another job", "a is being stored by another job"]
    messages += ["a is being recorded by another job", "EZID: 503; telling EZID again later"]
    messages += ["Waiting For Disk Space, in another hand"]
    n = itertools.count(1)
    submissions = [
        {**OURS, "type": "file"},
        {"payload_url": "https://example.org/x", "type": "file"},  # ours in mode all only
        {"type": "file"},  # Merritt's ingest's
        {**OURS, "type": "mrt-zip"},
        {**OURS, "type": "rerun", "rerun_of": "bid0000000001"},
        {**OURS, "type": "rerun", "rerun_of": ""},
    ]
    for status, submission in itertools.product(
        ("Pending", "Held", "Processing", "Completed", "Failed"), submissions
    ):
        make_batch(next(n), status, collection="demo", submission=submission)
        make_batch(next(n), status, collection="other", locked=True, submission=submission)
    statuses = [s for s, _ in Job._meta.get_field("status").choices]
    # Every message unlocked and ours; a lock and Merritt's ownership on a few messages.
    rows = [(m, False, "local") for m in messages]
    rows += [(m, lock, "merritt-queue") for m in messages[:2] for lock in (False, True)]
    rows += [("", True, "local")]
    for status, (message, locked, owner), collection in itertools.product(
        statuses, rows, ("demo", "other")
    ):
        configuration = {**OURS, "payload_type": "file", "store_record": owner}
        make_job(
            next(n),
            status,
            message=message,
            collection=collection,
            locked=locked,
            configuration=configuration,
        )
    theirs = [
        {},
        {"payload_url": "u", "payload_type": ""},
        {"payload_url": "u", "payload_type": "f"},
    ]
    for status, configuration in itertools.product(statuses, theirs):
        make_job(next(n), status, message=DISK, configuration=configuration)


FACTS = {
    "none": lambda: None,
    "paused": pause,
    "paused by a window": lambda: pause(by_window=True),
    "held": hold,
    "held by a window": lambda: hold(by_window=True),
    "both": lambda: (pause(), hold("other")),
}


@pytest.mark.parametrize(
    ("situation", "workers"),
    [(situation, "all") for situation in FACTS] + [("none", "own"), ("none", "none")],
)
def test_the_database_and_the_decision_give_every_row_the_same_reason(situation, workers, settings):
    settings.MQ_WORKERS = workers
    every_kind_of_row()
    FACTS[situation]()
    read = queue_facts()
    breakers = (w.Breaker("EZID", NOW, NOW, ("Processing",)),)
    seen = set()
    for facts in (read, w.QueueFacts(read.pause, read.holds, breakers=breakers)):
        jobs = Job.objects.annotate(**{ANNOTATION: job_case(facts)})
        for job in jobs:
            found = w.decide(job_item(job), facts)
            assert getattr(job, ANNOTATION) == (found.code if found else NOT_WAITING), job
            seen.add(getattr(job, ANNOTATION))
        for batch in Batch.objects.annotate(**{ANNOTATION: batch_case(facts)}):
            found = w.decide(batch_item(batch), facts)
            assert getattr(batch, ANNOTATION) == (found.code if found else NOT_WAITING), batch
    if situation == "none" and workers != "none":
        assert seen >= {w.HELD, w.MERRITT_STORAGE, w.DISK_SPACE, w.HOST_SLOTS, w.WORKER}
        assert w.MERRITT_INGEST in seen
        assert w.DEPENDENCY_DOWN in seen and w.STORAGE_LOCK in seen and w.RETRYING in seen


def test_the_lists_show_why_and_filter_by_it(browser):
    make_batch(1, "Pending")
    make_job(1, "Provisioning", message=DISK)
    make_job(2, "Pending")
    make_job(3, "Completed")
    body = browser.get("/jobs/").content.decode()
    assert 'class="wait wait-disk_space"' in body and 'class="wait wait-worker"' in body
    page = browser.get("/jobs/?waiting=disk_space").content.decode()
    assert jid(1) in page and jid(2) not in page and jid(3) not in page
    page = browser.get("/jobs/?waiting=worker").content.decode()
    assert jid(2) in page and jid(1) not in page
    # An unknown reason is the filter form's error, and selects nothing.
    wrong = browser.get("/jobs/?waiting=nonsense")
    assert wrong.status_code == 200 and "Select a valid choice" in wrong.content.decode()
    hold()
    batches = browser.get("/batches/?waiting=collection_held").content.decode()
    assert bid(1) in batches and 'class="wait wait-collection_held"' in batches
    assert bid(1) not in browser.get("/batches/?waiting=worker").content.decode()


def count_queries(browser, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert browser.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_the_lists_queries_stay_flat_as_rows_grow(browser):
    pause()
    hold("other")
    make_batch(1)
    for n in range(1, 6):
        make_job(n, "Provisioning" if n % 2 else "Pending", message=DISK)
    urls = ["/jobs/", "/jobs/?waiting=queue_paused", "/batches/", f"/batches/{bid(1)}/"]
    for url in urls:  # the caches pages share (the stalled jobs' model) filled first
        count_queries(browser, url)
    small = {url: count_queries(browser, url) for url in urls}
    for n in range(2, 60):
        make_batch(n)
    for n in range(6, 120):
        make_job(n, "Provisioning" if n % 2 else "Pending", message=DISK, batch=n % 7 + 1)
    assert {url: count_queries(browser, url) for url in urls} == small


def finished_lately(count: int, every: timedelta, took: timedelta) -> None:
    """``count`` jobs completed in the last hour, ``every`` apart, ``took`` after leaving
    Pending: the pace the estimate is made from."""
    for i in range(count):
        done = NOW - timedelta(minutes=1) - i * every
        job = f"jid{9_000_000_000 + i}"
        JobEvent.objects.create(jid=job, to_status="Estimating", at=done - took, status_version=1)
        JobEvent.objects.create(jid=job, to_status="Completed", at=done, status_version=7)


def test_a_job_waiting_for_a_worker_knows_its_place_and_when_it_should_start(browser):
    make_batch(1)
    make_batch(2)
    for n in range(1, 7):  # batch 1: jobs 1-6; batch 2 (submitted later): 7-9
        make_job(n, space_needed=100)
    for n in range(7, 10):
        make_job(n, batch=2, space_needed=1000)
    make_job(10, priority=1, batch=2, space_needed=5)  # more urgent: ahead of all
    finished_lately(11, timedelta(seconds=10), timedelta(seconds=30))
    # Batches take turns: before job 3 (its batch's third) go job 10, jobs 1-2 and 7-8.
    found = job_waiting(Job.objects.get(jid=jid(3)), NOW)
    assert found.code == w.WORKER
    order = found.order
    assert (order.position, order.jobs_ahead, order.bytes_ahead) == (6, 5, 2205)
    # The pace: 11 jobs finished 10 s apart; each took 30 s after leaving Pending.
    assert order.starts_at == NOW + timedelta(seconds=50)
    assert order.finishes_at == NOW + timedelta(seconds=80)
    # The same in another state: plain PP-JID order.
    make_job(11, "Downloading", space_needed=7)
    make_job(12, "Downloading", space_needed=7)
    assert job_waiting(Job.objects.get(jid=jid(12)), NOW).order.jobs_ahead == 1
    page = browser.get(f"/jobs/{jid(3)}/").content.decode()
    assert 'data-reason="worker"' in page and "5 jobs (2.2" in page
    assert "at the pace of the last hour" in page
    batch_page = browser.get(f"/batches/{bid(1)}/").content.decode()
    assert "its last job " + jid(6) in batch_page


def test_jobs_finished_within_one_second_still_give_a_pace():
    """The timeline knows times to the second: twelve jobs finished in the same second were
    done at least eleven a second, not at no measured pace at all."""
    finished_lately(12, timedelta(0), timedelta(seconds=3))
    rate = measured_rate(NOW)
    assert rate.per_second == 11.0
    assert rate.seconds_after["Pending"] == 3.0


@pytest.fixture
def depositor_key(django_user_model):
    user = django_user_model.objects.create_user("dana")
    grant_depositor(user, ["demo"])
    return ApiToken.issue(user, "tests")[1]


def api(client, path: str, key: str) -> dict:
    response = client.get(path, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.content
    return response.json()


def test_the_status_api_says_why_without_naming_people_or_other_jobs(client, depositor_key):
    make_batch(1)
    make_job(1, "Pending")
    make_job(2, "Storing", message="ark:/99999/fk4j2 is being stored by another job")
    make_job(3, "Completed")
    finished_lately(3, timedelta(seconds=20), timedelta(seconds=5))
    body = api(client, f"/api/v1/jobs/{jid(1)}", depositor_key)["waiting"]
    assert body["reason"] == "worker" and body["position"] == 1 and body["jobs_ahead"] == 0
    assert body["starts_at"] and body["finishes_at"]
    assert api(client, f"/api/v1/jobs/{jid(3)}", depositor_key)["waiting"] is None
    storage_lock("ark:/99999/fk4j2", "jid0000000077")
    stored = api(client, f"/api/v1/jobs/{jid(2)}", depositor_key)["waiting"]
    assert stored["reason"] == "storage_lock" and "jid0000000077" not in str(stored)
    assert "jid0000000077" in job_waiting(Job.objects.get(jid=jid(2))).words
    pause()
    paused = api(client, f"/api/v1/jobs/{jid(1)}", depositor_key)["waiting"]
    assert paused["reason"] == "queue_paused" and "alice" not in str(paused)
    batch = api(client, f"/api/v1/batches/{bid(1)}", depositor_key)["waiting"]
    assert batch["reason"] == "queue_paused"


def test_metrics_count_the_waiting_jobs_by_reason():
    make_batch(1)
    make_job(1, "Pending")
    make_job(2, "Pending", collection="other")
    make_job(3, "Provisioning", message=DISK)
    make_job(4, "Downloading", locked=True)
    hold("other")
    facts = c.read_mirror()
    assert facts.waiting["collection_held"] == 1
    assert facts.waiting["worker"] == 1 and facts.waiting["disk_space"] == 1
    assert sum(facts.waiting.values()) == 3
    (family,) = [m for m in c.mirror_metrics(facts) if m.name == "mq_jobs_waiting"]
    shown = {s.labels["reason"]: s.value for s in family.samples}
    assert shown["collection_held"] == 1 and set(shown) == set(w.REASONS)


def test_a_pause_is_told_by_whom_only_when_this_sites_pages_paused_it(browser):
    make_batch(1)
    make_job(1, "Pending")
    pause()
    assert "paused by alice" in job_waiting(Job.objects.get(jid=jid(1))).words
    AdminAction.objects.create(
        username="carol", action="queue.resume", scope="queue", reason="done", token="t2"
    )
    # Paused again, by another tool: nobody is named, rather than the wrong person.
    found = job_waiting(Job.objects.get(jid=jid(1)))
    assert found.code == w.QUEUE_PAUSED and " by " not in found.words
    window(MaintenanceWindow.QUEUE)
    found = job_waiting(Job.objects.get(jid=jid(1)))
    assert found.code == w.MAINTENANCE_WINDOW and found.ends_at == NOW + timedelta(hours=1)
    assert "maintenance window" in browser.get(f"/jobs/{jid(1)}/").content.decode()


def test_an_open_breaker_reaches_every_reader(browser, monkeypatch):
    """Where the circuit breakers plug in: ``jobs.waitfacts.open_breakers``."""
    from jobs import waitfacts

    ezid = w.Breaker("EZID", NOW, NOW + timedelta(minutes=5), ("Processing",))
    monkeypatch.setattr(waitfacts, "open_breakers", lambda: (ezid,))
    make_batch(1)
    make_job(1, "Processing")
    assert "EZID unreachable since" in browser.get(f"/jobs/{jid(1)}/").content.decode()
    assert jid(1) in browser.get("/jobs/?waiting=dependency_down").content.decode()
    assert c.read_mirror().waiting["dependency_down"] == 1


def test_a_job_a_breaker_holds_waits_for_its_dependency_in_every_reader(
    browser, client, depositor_key
):
    """A step refused by an open breaker notes the breaker's words on its job (a host's
    breaker too, which no job state names): every reader says the dependency is down."""
    from merritt_queue.services.breakerstate import BreakerState

    auto = BreakerState("content:h.example.org", "open", since=1e9, next_probe=1e9 + 300)
    hand = BreakerState("ezid", "open", since=1e9, by="alice", reason="EZID's Thursday pause")
    make_batch(1)
    make_job(1, "Downloading", message=auto.explain())
    make_job(2, "Processing", message=hand.explain())
    assert "content host h.example.org unreachable since" in auto.explain()
    assert jid(1) in browser.get("/jobs/?waiting=dependency_down").content.decode()
    assert jid(2) in browser.get("/jobs/?waiting=dependency_down").content.decode()
    assert c.read_mirror().waiting["dependency_down"] == 2
    page = browser.get(f"/jobs/{jid(2)}/").content.decode()
    assert "when an administrator closes its breaker" in page
    body = api(client, f"/api/v1/jobs/{jid(2)}", depositor_key)["waiting"]
    assert body["reason"] == "dependency_down"
    assert "alice" not in str(body)  # no person's name to a depositor


def test_the_dashboard_counts_why_jobs_wait_as_metrics_does(browser, client, django_user_model):
    make_batch(1)
    make_job(1, "Provisioning", message=DISK)
    make_job(2, "Provisioning", message=DISK)
    make_job(3, "Pending")
    make_job(4, "Completed")
    page = browser.get("/").content.decode()
    assert 'href="/jobs/?waiting=disk_space">2</a>' in page
    assert 'href="/jobs/?waiting=worker">1</a>' in page
    assert c.read_mirror().waiting["disk_space"] == 2
    # A depositor, who reads one collection, is not given counts over all of them.
    dana = django_user_model.objects.create_user("dana")
    grant_depositor(dana, ["demo"])
    client.force_login(dana)
    assert 'id="waiting"' not in client.get("/").content.decode()
