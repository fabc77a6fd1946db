"""Stalled jobs and capacity ahead (issue 34, parts 7 and 8) over mirror rows made directly:
a history with known step times flags exactly the job past its time, on its page, in the
job list and in /metrics; too little history flags nothing and says so; the backlog, the
disk forecast and a held collection's release from known figures, the same on the
dashboard and in /metrics."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches.models import Batch, Collection
from jobs import stalls
from jobs.models import Job, JobEvent
from tests.pages.test_metrics import scrape, services_away, value
from tests.roles import viewer
from ui import ahead as a

MB, GB = 10**6, 10**9
NOW = timezone.now()

__all__ = ["services_away"]  # the scrape's fixture: ZooKeeper and Redis on closed ports

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_now():
    """Each test's rows are made a moment before it reads them, however long the run."""
    global NOW
    NOW = timezone.now()


@pytest.fixture(autouse=True)
def empty_cache():
    """The models, the stalled jobs and the last hour are cached: each test starts afresh."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def client(client):
    client.force_login(viewer(User.objects.create_user("librarian", password="pw")))
    return client


def job(jid: str, status: str, size: int = 0, **kw) -> Job:
    kw.setdefault("last_modified", NOW)
    return Job.objects.create(
        jid=jid, status=status, space_needed=size, read_at=NOW, batch_id="bid0000000001", **kw
    )


def row(jid: str, version: int, old: str, new: str, at, **kw) -> None:
    JobEvent.objects.create(
        jid=jid, from_status=old, to_status=new, at=at, status_version=version, exact=True, **kw
    )


def download_history(n: int = 40) -> None:
    """Finished downloads of 100 MB to 10 GB that took 30 s plus 0.5 s a MB, a little
    more or less, over the last day."""
    for i in range(n):
        jid = f"hst{i:010d}"
        size = (100 + 9900 * i // (n - 1)) * MB
        seconds = (30 + 0.5 * size / MB) * (0.95 + 0.1 * (i % 3) / 2)
        entered = NOW - timedelta(hours=20) + timedelta(minutes=20 * i)
        job(jid, "Completed", size)
        row(jid, 3, "Provisioning", "Downloading", entered)
        row(jid, 4, "Downloading", "Processing", entered + timedelta(seconds=seconds))


def in_step(jid: str, state: str, size: int, since: timedelta, note: timedelta | None = None):
    """A job in ``state`` since ``since`` ago; with ``note``, a note written that long ago."""
    previous = {"Downloading": "Provisioning", "Storing": "Processing"}[state]
    last = NOW - (note if note is not None else since)
    job(jid, state, size, last_modified=last)
    row(jid, 3, previous, state, NOW - since)
    if note is not None:
        row(jid, 4, state, state, last, message="waiting for a download slot")


SMALL, LARGE, STORING, FRESH = (f"jid000000000{i}" for i in range(1, 5))


@pytest.fixture
def stalling():
    download_history()
    # A small job an hour in Downloading (its note five minutes ago does not restart it).
    in_step(SMALL, "Downloading", 10 * MB, timedelta(hours=1), note=timedelta(minutes=5))
    # A large job an hour in: its size takes over an hour.
    in_step(LARGE, "Downloading", 8_000 * MB, timedelta(hours=1))
    # Storing has no history at all.
    in_step(STORING, "Storing", 10 * MB, timedelta(hours=5))
    # Just begun: within the floor.
    in_step(FRESH, "Downloading", 10 * MB, timedelta(minutes=2))


def listed(body: str) -> set[str]:
    return set(re.findall(r'href="/jobs/(jid\d{10})/"', body))


# --- part 7: stalled jobs -----------------------------------------------------------------


def test_a_history_with_known_step_times_flags_exactly_the_job_past_its_time(stalling):
    model = stalls.models()["Downloading"]
    assert model.ready and model.samples == 40
    assert [s.jid for s in stalls.find_stalled()] == [SMALL]
    large = stalls.verdict_of(Job.objects.get(jid=LARGE))
    assert large is not None and not large.stalled and large.usual is not None
    assert large.usual > 3600  # 8 GB usually takes longer than the hour it has had


def test_the_job_page_says_how_long_and_how_long_jobs_of_its_size_take(client, stalling):
    body = client.get(f"/jobs/{SMALL}/").content.decode()
    verdict = stalls.verdict_of(Job.objects.get(jid=SMALL))
    assert verdict is not None and verdict.stalled
    words = stalls.words(verdict)
    assert words.startswith("Downloading for 1 h 0 min; jobs of this size usually take under ")
    assert 'data-stalled="true"' in body and words in body
    large = client.get(f"/jobs/{LARGE}/").content.decode()
    assert 'data-stalled="false"' in large and "jobs of this size usually take under 1 h" in large


def test_the_job_list_badges_and_filters_the_stalled_jobs(client, stalling):
    body = client.get("/jobs/").content.decode()
    assert listed(body) >= {SMALL, LARGE, STORING, FRESH}
    assert body.count('class="st st-stalled"') == 1
    badge = body.index('class="st st-stalled"')
    assert body.rfind(f'href="/jobs/{SMALL}/"', 0, badge) > body.rfind(
        f'href="/jobs/{LARGE}/"', 0, badge
    )
    stalled_list = client.get("/jobs/?stalled=1").content.decode()
    assert listed(stalled_list) == {SMALL}
    assert "Processing, Storing, Recording, Notify. Their jobs are never" in stalled_list
    assert listed(client.get("/jobs/?stalled=1&status=Storing").content.decode()) == set()


def test_metrics_count_the_stalled_jobs_by_state(client, stalling):
    fams = scrape(client)
    assert value(fams, "mq_jobs_stalled", state="Downloading") == 1
    assert value(fams, "mq_jobs_stalled", state="Storing") == 0
    assert value(fams, "mq_stall_history_steps", state="Downloading") == 40
    assert value(fams, "mq_stall_history_steps", state="Storing") == 0


def test_too_little_history_flags_nothing_and_says_so(client):
    download_history(n=12)
    in_step(SMALL, "Downloading", 10 * MB, timedelta(hours=5))
    assert stalls.find_stalled() == []
    body = client.get(f"/jobs/{SMALL}/").content.decode()
    assert 'data-stalled="false"' in body
    assert (
        "Downloading for 5 h 0 min; too little history to say how long it usually takes "
        "(fewer than 30 finished Downloading steps in the last 7 days): not judged"
    ) in body
    stalled_list = client.get("/jobs/?stalled=1").content.decode()
    assert listed(stalled_list) == set()
    assert "Not judged, for too little history" in stalled_list
    assert "Estimating, Provisioning, Downloading, Processing, Storing, Recording, Notify" in (
        stalled_list
    )
    assert value(scrape(client), "mq_jobs_stalled", state="Downloading") == 0


def test_the_stalled_list_costs_as_many_queries_for_100_jobs_in_steps_as_for_10(client):
    download_history()

    def count() -> tuple[int, ...]:
        found = []
        for url in ("/jobs/?stalled=1", "/jobs/"):  # the filter, and the page's badges
            cache.clear()
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url).status_code == 200
            found.append(len(ctx.captured_queries))
        return tuple(found)

    for i in range(10):
        in_step(f"jid{i:010d}", "Downloading", 10 * MB, timedelta(hours=2))
    small = count()
    for i in range(10, 100):
        in_step(f"jid{i:010d}", "Downloading", 10 * MB, timedelta(hours=2))
    assert count() == small
    assert len(stalls.find_stalled()) == 100


def test_the_models_are_learned_once_and_kept():
    download_history()
    stalls.models()
    with CaptureQueriesContext(connection) as ctx:
        stalls.models()
    assert ctx.captured_queries == []


# --- part 8: capacity ahead -----------------------------------------------------------------


@pytest.fixture
def last_hour():
    """In the last hour: 10, 20 and 30 GB entered Downloading, a 20 GB job completed and one
    failed; 10 Pending and 3 Downloading jobs are ahead, 5 Held and 2 Failed wait for people."""
    for i, size in enumerate((10, 20, 30)):
        jid = f"jid{i + 1:010d}"
        job(jid, "Downloading", size * GB)
        row(jid, 3, "Provisioning", "Downloading", NOW - timedelta(minutes=10 * (i + 1)))
        row(jid, 4, "Downloading", "Downloading", NOW - timedelta(minutes=1))  # a note
    job("jid0000000010", "Completed", 20 * GB)
    row("jid0000000010", 9, "Notify", "Completed", NOW - timedelta(minutes=30))
    job("jid0000000011", "Failed", 7 * GB)
    row("jid0000000011", 5, "Storing", "Failed", NOW - timedelta(minutes=40))
    row("jid0000000012", 9, "Notify", "Completed", NOW - timedelta(minutes=61))  # too early
    for i in range(10):
        job(f"pnd{i:010d}", "Pending")
    for i in range(5):
        job(f"hld{i:010d}", "Held")
    job("fld0000000001", "Failed")


def counts() -> dict[str, int]:
    rows = Job.objects.order_by().values_list("status").annotate(n=a.Count("id"))
    return dict(rows)


def test_the_last_hour_backlog_and_disk_forecast_from_a_known_fixture(last_hour):
    hour = a.read_last_hour(timezone.now())
    assert hour == a.LastHour(finished=2, bytes_in=60 * GB, bytes_out=20 * GB)
    # A 1 TB disk, 700 GB unusable, threshold 80 %: 100 GB of room at 40 GB an hour.
    figures = a.ahead(counts(), disk=(700 * GB, 1000 * GB))
    assert figures.backlog == 13
    assert figures.backlog_seconds == 3600 * 13 / 2
    assert figures.disk is not None and figures.disk.threshold == 80
    assert figures.disk.seconds == 3600 * 100 / 40


def test_the_dashboard_and_metrics_give_the_same_backlog(client, last_hour):
    body = client.get("/").content.decode()
    assert 'id="ahead-backlog" data-jobs="13" data-seconds="23400.0"' in body
    assert (
        "<strong>13</strong> jobs Pending or in a step: about 6 h 30 min at 2 jobs an hour" in body
    )
    assert 'id="ahead-disk"' in body and "threshold 80 % (MQ_DISK_THRESHOLD)" in body
    fams = scrape(client)
    assert value(fams, "mq_backlog_jobs") == 13
    assert value(fams, "mq_jobs_finished_last_hour") == 2
    assert value(fams, "mq_backlog_seconds") == 23400
    assert 0 <= value(fams, "mq_work_disk_used_percent") <= 100


def test_no_rate_gives_no_forecast(client):
    job("pnd0000000001", "Pending")
    figures = a.ahead(counts(), disk=(100, 1000))
    assert figures.backlog == 1 and figures.backlog_seconds is None
    assert figures.disk is not None and figures.disk.seconds is None
    body = client.get("/").content.decode()
    assert "no job finished in the last hour, so no time can be given" in body
    assert "mq_backlog_seconds" not in {n for n in scrape(client)}


@pytest.fixture
def held_demo(last_hour):
    """demo on hold: three jobs and a batch its hold caught (two jobs not sized yet, one of
    5 GB), a 1 GB job a person held; its latest finished jobs are 2 GB each."""
    Collection.objects.create(mnemonic="demo", held=True, held_by="ada")
    caught = "collection demo is on hold"
    for i, size in enumerate((0, 0, 5 * GB)):
        job(f"dem{i:010d}", "Held", size, collection="demo", message=caught)
    job("dem0000000009", "Held", GB, collection="demo", message="held by ada: check it")
    Batch.objects.create(
        bid="bid0000000077", status="Held", collection="demo", message=caught, read_at=NOW
    )
    for i in range(3):
        job(f"dmc{i:010d}", "Completed", 2 * GB, collection="demo")
    job("oth0000000001", "Held", 50 * GB, collection="other", message="collection other is on hold")


def test_the_release_preview_counts_the_held_collections_jobs_and_bytes(held_demo):
    caught = a.release_previews(["demo"], by_hold_only=True)["demo"]
    assert (caught.jobs, caught.batches, caught.bytes_known, caught.unsized) == (3, 1, 5 * GB, 2)
    assert caught.typical_size == 2 * GB and caught.bytes == 9 * GB and caught.estimated
    assert caught.seconds == 3600 * 3 / 2
    every = a.release_previews(["demo"], by_hold_only=False)["demo"]
    assert (every.jobs, every.bytes) == (4, 10 * GB)


def test_the_dashboard_previews_each_held_collections_release(client, held_demo):
    body = client.get("/").content.decode()
    assert 'data-collection="demo" data-jobs="3" data-bytes="9000000000"' in body
    assert "+3 jobs, about 8.4\xa0GB, about 1 h 30 min" in body
    assert "(and 1 held batch whose jobs are not known yet)" in body


def test_the_dashboard_query_count_does_not_grow_with_held_jobs(client, held_demo):
    def count() -> int:
        cache.clear()
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/").status_code == 200
        return len(ctx.captured_queries)

    small = count()
    for i in range(200):
        job(f"dmx{i:010d}", "Held", 0, collection="demo", message="collection demo is on hold")
    assert count() == small


def test_a_stall_setting_of_nothing_fails_its_check_by_name(settings):
    from merritt_queue.project.checks import check_stall_settings

    assert check_stall_settings() == []
    settings.MQ_STALL_MIN_SAMPLES, settings.MQ_STALL_WINDOW_DAYS = 0, 0
    found = check_stall_settings()
    assert {e.id for e in found} == {"mq.E095"}
    assert [e.msg for e in found] == [
        "MQ_STALL_WINDOW_DAYS=0 must be at least 1.",
        "MQ_STALL_MIN_SAMPLES=0 must be at least 1.",
    ]


def test_the_status_api_gives_a_job_in_a_step_its_step_time(client, stalling, django_user_model):
    from batches.models import ApiToken
    from door.rights import grant_depositor

    dana = django_user_model.objects.create_user("dana")
    grant_depositor(dana, [""])  # the fixture's jobs have no collection
    key = ApiToken.issue(dana, "tests")[1]
    client.logout()
    body = client.get(f"/api/v1/jobs/{SMALL}", headers={"Authorization": f"Bearer {key}"}).json()
    verdict = stalls.verdict_of(Job.objects.get(jid=SMALL))
    assert verdict is not None
    seconds = body["step_time"]["seconds_in_state"]
    assert 3600 <= seconds <= round(verdict.elapsed)  # the page's figure, read a moment later
    assert body["step_time"] == {
        "state": "Downloading",
        "seconds_in_state": seconds,
        "usually_under_seconds": round(verdict.usual or 0),
        "stalled": True,
        "judged": True,
        "words": stalls.words(verdict),
    }


def test_a_depositor_sees_the_backlog_not_the_sites_disk(client, last_hour, django_user_model):
    from door.rights import grant_depositor

    dana = django_user_model.objects.create_user("dana")
    grant_depositor(dana, ["demo"])
    client.force_login(dana)
    body = client.get("/").content.decode()
    assert 'id="ahead-backlog" data-jobs="13"' in body and 'id="ahead-disk"' not in body
