"""The batch and job pages: they read the mirror, filter, sort, paginate and escape."""

from __future__ import annotations

import os
import re
import socket
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches.models import Batch, BatchEvent, Collection
from jobs.models import Job, JobEvent
from merritt_queue.core.states import BatchStatus, JobStatus
from merritt_queue.core.tree import parse_timestamp
from merritt_queue.project import runtime
from mirror import textindex
from tests.roles import viewer
from ui.cells import age_text
from ui.signatures import cause_of

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)
XSS = "<script>alert(1)</script>"
XSS_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def bid(n: int) -> str:
    return f"bid{n:010d}"


def jid(n: int) -> str:
    return f"jid{n:010d}"


def make_batch(n: int, status: str = "Processing", **fields) -> Batch:
    values = {
        "uuid": f"uuid-{n}",
        "collection": "demo",
        "profile": "demo_profile",
        "submitter": "sam",
        "type": "object-manifest",
        "title": f"Batch number {n}",
        "submitted": NOW - timedelta(days=n),
        "status": status,
        "submission": {"profile": "demo_profile", "batchID": f"uuid-{n}", "erc_what": "x"},
        "read_at": NOW,
    }
    values.update(fields)
    return Batch.objects.create(bid=bid(n), **values)


def make_job(n: int, status: str = "Pending", batch: int = 1, **fields) -> Job:
    values = {
        "batch_id": bid(batch),
        "collection": "demo",
        "profile": "demo_profile",
        "submitter": "sam",
        "status": status,
        "priority": 5,
        "space_needed": 2048,
        "local_id": f"local-{n}",
        "ark": f"ark:/99999/fk4j{n}",
        "title": f"Object number {n}",
        "last_modified": NOW - timedelta(minutes=n),
        "configuration": {"collection": "demo", "payload_url": f"https://example.org/{n}"},
        "read_at": NOW,
    }
    values.update(fields)
    values.setdefault("signature", cause_of(values.get("message", "")))  # as the mirror does
    return Job.objects.create(jid=jid(n), **values)


def make_event(job: Job, version: int, old: str, new: str, minutes: int, **fields) -> JobEvent:
    return JobEvent.objects.create(
        jid=job.jid,
        bid=job.batch_id or "",
        from_status=old,
        to_status=new,
        at=NOW - timedelta(minutes=minutes),
        status_version=version,
        **fields,
    )


def listed(response) -> list[str]:
    """The ids in the page's table, in display order."""
    table = response.context["table"]
    return [getattr(row.record, "jid", None) or row.record.bid for row in table.paginated_rows]


@pytest.fixture
def user(django_user_model):
    return viewer(django_user_model.objects.create_user("librarian"))  # no password: fast


@pytest.fixture
def browser(client, user):
    client.force_login(user)
    return client


# --- every page renders ----------------------------------------------------------------


@pytest.mark.parametrize("status", list(JobStatus))
def test_the_job_pages_render_for_a_job_in_each_status(browser, status):
    make_batch(1)
    job = make_job(1, status, last_successful_status="Provisioning", message=f"now {status}")
    make_event(job, 1, "Pending", status, 5, actor="worker", message="moved")
    listing = browser.get("/jobs/")
    assert listing.status_code == 200
    assert listed(listing) == [job.jid]
    detail = browser.get(f"/jobs/{job.jid}/")
    assert detail.status_code == 200
    body = detail.content.decode()
    assert f"now {status}" in body and "moved" in body and "worker" in body
    if status == "Failed":
        assert "failed at step <strong>Downloading</strong>" in body


@pytest.mark.parametrize("status", list(BatchStatus))
def test_the_batch_pages_render_for_a_batch_in_each_status(browser, status):
    make_batch(1, status, job_counts={"Completed": 3, "Failed": 1}, job_total=4)
    listing = browser.get("/batches/")
    assert listing.status_code == 200
    assert listed(listing) == [bid(1)]
    assert "3 Completed · 1 Failed" in listing.content.decode()
    detail = browser.get(f"/batches/{bid(1)}/")
    assert detail.status_code == 200
    assert f'<span class="st st-{status.lower()}">{status}</span>' in detail.content.decode()


def test_job_counts_are_shown_compactly_in_state_order(browser):
    make_batch(1, job_counts={"Failed": 1, "Pending": 2, "Completed": 3, "Held": 0})
    assert "2 Pending · 3 Completed · 1 Failed" in browser.get("/batches/").content.decode()


@pytest.mark.parametrize(
    "seconds, text",
    [(5, "5 s"), (600, "10 min"), (3 * 3600 + 120, "3 h 2 min"), (3 * 86400 + 7200, "3 d 2 h")],
)
def test_the_age_of_a_batch_is_short(seconds, text):
    assert age_text(timedelta(seconds=seconds)) == text


def test_unknown_ids_are_404(browser):
    assert browser.get(f"/jobs/{jid(404)}/").status_code == 404
    assert browser.get(f"/batches/{bid(404)}/").status_code == 404
    assert browser.get("/jobs/nonsense/").status_code == 404


@pytest.mark.parametrize(
    "url", ["/batches/", f"/batches/{bid(1)}/", "/jobs/", f"/jobs/{jid(1)}/?live=1"]
)
def test_anonymous_users_are_sent_to_the_login_page(client, url):
    make_batch(1)
    make_job(1)
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/?next=")


# --- job filters and search ------------------------------------------------------------


@pytest.fixture
def jobs():
    make_batch(1)
    make_batch(2, collection="other", submitter="ann")
    made = [
        make_job(1, "Pending"),
        make_job(2, "Failed", last_successful_status="Provisioning"),  # failed downloading
        make_job(3, "Failed", last_successful_status="Pending"),  # failed estimating
        make_job(4, "Failed"),  # failed while Pending
        make_job(5, "Downloading", last_successful_status="Provisioning"),
        make_job(6, "Held", batch=2, collection="other", submitter="ann"),
        make_job(7, "Completed", batch=2, collection="other", submitter="ann", title="Motel Capri"),
        make_job(8, "Completed", last_modified=NOW - timedelta(days=10), local_id="shared"),
    ]
    return {j.jid: j for j in made}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", [8, 7, 6, 5, 4, 3, 2, 1]),
        ("status=Failed", [4, 3, 2]),
        ("status=Failed&status=Held", [6, 4, 3, 2]),
        ("collection=other", [7, 6]),
        (f"batch={bid(2)}", [7, 6]),
        ("submitter=ann", [7, 6]),
        ("failed_at=Downloading", [2]),
        ("failed_at=Estimating", [3]),
        ("failed_at=Pending", [4]),
        ("failed_at=Notify", []),
        ("status=Completed&collection=demo", [8]),
        # by calendar date in the site's time zone (UTC in tests)
        (f"last_modified_before={(NOW - timedelta(days=5)).date()}", [8]),
        # (a last-change range lists the latest change first)
        (f"last_modified_after={(NOW - timedelta(days=5)).date()}", [1, 2, 3, 4, 5, 6, 7]),
        (f"q={jid(3)}", [3]),
        ("q=3", [3]),
        ("q=ark:/99999/fk4j5", [5]),
        ("q=shared", [8]),
        ("q=motel capri", [7]),
        ("q=Object number", [8, 6, 5, 4, 3, 2, 1]),
        ("q=nothing-like-this", []),
    ],
)
def test_each_job_filter_and_the_search_return_exactly_the_right_rows(
    browser, jobs, query, expected
):
    response = browser.get(f"/jobs/?{query}")
    assert response.status_code == 200
    assert listed(response) == [jid(n) for n in expected]


def test_an_exact_identifier_wins_over_titles_that_contain_it(browser, jobs):
    make_job(9, title="about local-3 and more")
    assert listed(browser.get("/jobs/?q=local-3")) == [jid(3)]
    assert listed(browser.get("/jobs/?q=about local-3")) == [jid(9)]


def test_a_text_most_jobs_hold_pages_without_counting(browser, monkeypatch):
    monkeypatch.setattr(textindex, "MANY", 20)  # past it, counting would read every job
    make_batch(1)
    for n in range(1, 61):
        make_job(n, title=f"Postcard {n}" if n % 2 else f"Letter {n}")
    first = browser.get("/jobs/?q=postcard&per_page=20")
    assert listed(first) == [jid(n) for n in range(59, 19, -2)]
    assert "more follow" in first.content.decode()
    last = browser.get("/jobs/?q=postcard&per_page=20&page=2")
    assert listed(last) == [jid(n) for n in range(19, 0, -2)]
    assert "more follow" not in last.content.decode()
    with CaptureQueriesContext(connection) as ctx:
        browser.get("/jobs/?q=postcard")
    assert not [q for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]


def test_a_last_change_range_lists_the_latest_change_first_unless_sorted(browser):
    make_batch(1)
    for n, minutes in ((1, 5), (2, 50), (3, 20)):
        make_job(n, last_modified=NOW - timedelta(minutes=minutes))
    day = NOW.date()
    url = f"/jobs/?last_modified_after={day - timedelta(days=1)}&last_modified_before={day}"
    assert listed(browser.get(url)) == [jid(1), jid(3), jid(2)]
    assert listed(browser.get(url + "&sort=-jid")) == [jid(3), jid(2), jid(1)]


def test_a_bad_filter_value_shows_the_error_and_no_rows(browser, jobs):
    response = browser.get("/jobs/?status=Bogus")
    assert response.status_code == 200
    assert listed(response) == []
    assert "Bogus is not one of the available choices" in response.content.decode()


def test_the_filter_form_keeps_the_query_and_the_collections(browser, jobs):
    Collection.objects.create(mnemonic="other")
    body = browser.get("/jobs/?status=Held&q=Object&sort=-priority").content.decode()
    assert re.search(r'value="Held"[^>]*checked', body)
    assert 'name="q" value="Object"' in body
    assert '<input type="hidden" name="sort" value="-priority">' in body
    assert '<option value="other">' in body


# --- batch filters and search ----------------------------------------------------------


@pytest.fixture
def batches():
    return [
        make_batch(1, "Pending"),
        make_batch(2, "Completed", collection="other", submitter="ann"),
        make_batch(3, "Failed", title="Motel Capri postcards"),
        make_batch(4, "Held", uuid="c0ffee"),
        make_batch(5, "Completed", submitted=NOW - timedelta(days=40)),
    ]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", [5, 4, 3, 2, 1]),
        ("status=Completed", [5, 2]),
        ("status=Completed&status=Held", [5, 4, 2]),
        ("collection=other", [2]),
        ("submitter=ann", [2]),
        (f"submitted_before={(NOW - timedelta(days=30)).date()}", [5]),
        (
            f"submitted_after={(NOW - timedelta(days=3)).date()}"
            f"&submitted_before={(NOW - timedelta(days=2)).date()}",
            [3, 2],
        ),
        (f"q={bid(4)}", [4]),
        ("q=4", [4]),
        ("q=c0ffee", [4]),
        ("q=capri", [3]),
        ("q=zzz", []),
    ],
)
def test_each_batch_filter_and_the_search_return_exactly_the_right_rows(
    browser, batches, query, expected
):
    response = browser.get(f"/batches/?{query}")
    assert response.status_code == 200
    assert listed(response) == [bid(n) for n in expected]


# --- pagination and sorting ------------------------------------------------------------


def test_the_job_list_is_paginated_newest_first(browser):
    make_batch(1)
    for n in range(1, 121):
        make_job(n)
    first = browser.get("/jobs/")
    assert listed(first) == [jid(n) for n in range(120, 70, -1)]
    assert "120 jobs · page 1 of 3" in first.content.decode()
    assert listed(browser.get("/jobs/?page=2")) == [jid(n) for n in range(70, 20, -1)]
    assert listed(browser.get("/jobs/?page=3")) == [jid(n) for n in range(20, 0, -1)]
    assert listed(browser.get("/jobs/?page=99")) == [jid(n) for n in range(20, 0, -1)]
    assert len(listed(browser.get("/jobs/?per_page=10"))) == 10
    assert len(listed(browser.get("/jobs/?per_page=100000"))) == 120  # capped at 500


def test_pagination_keeps_the_filters_in_the_links(browser):
    make_batch(1)
    for n in range(1, 61):
        make_job(n, "Failed" if n % 2 else "Pending")
    body = browser.get("/jobs/?status=Failed&per_page=10").content.decode()
    assert "?status=Failed&amp;per_page=10&amp;page=2" in body


@pytest.mark.parametrize(
    "sort, expected",
    [
        ("-priority", [2, 4, 3, 1]),
        ("priority", [1, 3, 4, 2]),
        ("last_modified", [4, 3, 2, 1]),
        ("-space_needed", [1, 2, 3, 4]),
        ("jid", [1, 2, 3, 4]),
        ("bogus", [4, 3, 2, 1]),
    ],
)
def test_the_job_list_sorts_on_the_server(browser, sort, expected):
    make_batch(1)
    for n, priority in ((1, 0), (2, 9), (3, 5), (4, 5)):
        make_job(n, priority=priority, space_needed=1000 - n)
    assert listed(browser.get(f"/jobs/?sort={sort}")) == [jid(n) for n in expected]


@pytest.mark.parametrize(
    "sort, expected",
    [("", [3, 2, 1]), ("submitted", [3, 2, 1]), ("age", [1, 2, 3]), ("-bid", [3, 2, 1])],
)
def test_the_batch_list_sorts_on_the_server(browser, sort, expected):
    for n in (1, 2, 3):
        make_batch(n)  # batch n was submitted n days ago
    assert listed(browser.get(f"/batches/?sort={sort}")) == [bid(n) for n in expected]


# --- escaping --------------------------------------------------------------------------


def test_depositor_text_is_escaped_on_list_and_detail_pages(browser):
    make_batch(1, title=XSS, submitter=XSS, submission={"erc_what": XSS, "nested": {"a": XSS}})
    job = make_job(1, title=XSS, message=XSS, local_id=XSS, metadata={"erc_who": XSS})
    make_event(job, 1, "Pending", "Failed", 1, message=XSS)
    for url in ("/batches/", f"/batches/{bid(1)}/", "/jobs/", f"/jobs/{job.jid}/"):
        body = browser.get(url).content.decode()
        assert XSS_ESCAPED in body, url
        assert XSS not in body, url


def test_a_long_message_is_truncated_with_the_full_text_in_its_title(browser):
    make_batch(1)
    message = "x" * 70 + ' "quoted" <b>' + "y" * 50
    make_job(1, message=message)
    body = browser.get("/jobs/").content.decode()
    assert 'title="' + "x" * 70 + " &quot;quoted&quot; &lt;b&gt;" + "y" * 50 + '"' in body
    assert "…" in body


# --- the number of queries does not grow with the rows ---------------------------------


def count_queries(browser, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert browser.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_the_lists_use_as_many_queries_for_200_rows_as_for_10(browser):
    make_batch(1, job_counts={"Pending": 10})
    for n in range(1, 11):
        make_job(n, metadata={"erc_what": "t"})
    job = Job.objects.get(jid=jid(1))
    for v in range(5):
        make_event(job, v, "Pending", "Estimating", v)
    urls = [
        "/jobs/",
        "/jobs/?per_page=500",
        "/jobs/?status=Pending&sort=-priority&page=2",
        "/jobs/?q=number",
        "/batches/",
        f"/batches/{bid(1)}/",
        f"/jobs/{jid(1)}/",
    ]
    small = {url: count_queries(browser, url) for url in urls}
    for n in range(2, 201):
        make_batch(n, job_counts={"Completed": 3})
    for n in range(11, 211):
        make_job(n, metadata={"erc_what": "t"})
    for v in range(5, 300):
        make_event(job, v, "Pending", "Estimating", v)
    large = {url: count_queries(browser, url) for url in urls}
    assert large == small
    # session, user, the user's groups (which admin actions to offer), mirror freshness,
    # collections, count, the page's keys, its rows; and why jobs wait (jobs.waitfacts:
    # the maintenance windows on, the locks and pause, the held collections)
    assert small["/jobs/"] <= 11


# --- batch detail ----------------------------------------------------------------------


def test_the_batch_page_shows_its_report_jobs_and_timeline(browser):
    make_batch(
        1,
        "Failed",
        message="1 job failed",
        status_report={
            "last_modified": "2026-01-02 03:04:05 +0000",
            "failed_jobs": [jid(2)],
            "successful_jobs": [jid(1), "not/a-jid"],
        },
    )
    make_batch(2)
    make_job(1, "Completed")
    make_job(3, batch=2)
    make_event(make_job(2, "Failed"), 1, "Pending", "Failed", 20, message="no such file")
    BatchEvent.objects.create(
        bid=bid(1), from_status="Reporting", to_status="Failed", at=NOW, status_version=4,
        message="1 job failed", exact=True,
    )  # fmt: skip
    response = browser.get(f"/batches/{bid(1)}/")
    body = response.content.decode()
    assert "1 job failed" in body
    assert f'<a href="/jobs/{jid(2)}/">{jid(2)}</a>' in body
    assert "not/a-jid" in body  # shown as text, never as a link
    assert [r.record.jid for r in response.context["jobs"].paginated_rows] == [jid(2), jid(1)]
    # The batch's own timeline; its jobs' rows are on their pages.
    assert [(r.version, r.to_status) for r in response.context["timeline"].rows] == [(4, "Failed")]
    assert "no such file" not in body
    assert f'href="/jobs/?batch={bid(1)}"' in body


def test_a_cut_status_report_shows_the_whole_counts(browser):
    make_batch(
        1,
        "Failed",
        status_report={
            "last_modified": "2026-01-02 03:04:05 +0000",
            "failed_jobs": [jid(2)],
            "successful_jobs": [jid(1)],
            "failed_count": 7,
            "successful_count": 12000,
        },
    )
    parts = browser.get(f"/batches/{bid(1)}/").context["report_lists"]
    shown = [(p["total"], len(p["links"]), p["more"]) for p in parts]
    assert shown == [(7, 1, 6), (12000, 1, 11999)]


def test_the_submission_is_shown_as_a_definition_list(browser):
    make_batch(1, submission={"erc_who": "Doe, J.", "digest": {"type": "md5"}, "n": 3, "z": None})
    body = browser.get(f"/batches/{bid(1)}/").content.decode()
    assert "<dt>erc_who</dt>" in body and "<dd>Doe, J.</dd>" in body
    assert "<pre>{&quot;type&quot;: &quot;md5&quot;}</pre>" in body
    assert "<dd>3</dd>" in body


# --- job detail ------------------------------------------------------------------------


def test_the_job_page_shows_identifiers_metadata_timeline_and_store(browser):
    make_batch(1)
    job = make_job(
        1,
        "Storing",
        identifiers={"primary_id": "ark:/99999/fk4zz", "local_id": ["a", "b"]},
        metadata={"erc_who": "Doe", "erc_what": "A title"},
        store={"manifest_url": "https://store.example/m", "mode": "add"},
        inventory=None,
    )
    make_event(job, 1, "", "Pending", 50, actor="reconcile")
    make_event(job, 2, "Pending", "Estimating", 40, actor="worker", retry_count=0)
    make_event(job, 3, "Estimating", "Failed", 30, actor="worker", message="disk full")
    make_event(job, 4, "Failed", "Estimating", 20, actor="admin:ada", retry_count=1)
    body = browser.get(f"/jobs/{job.jid}/").content.decode()
    assert "ark:/99999/fk4zz" in body and "https://store.example/m" in body
    assert "No inventory node." in body
    timeline = body[body.index("<h2>Timeline</h2>") :]
    positions = [timeline.index(actor) for actor in ("reconcile", "disk full", ">ada<")]
    assert positions == sorted(positions)


def test_the_job_page_lists_working_files_without_following_links(browser, settings, tmp_path):
    settings.MQ_WORK_DIR = str(tmp_path / "work")
    make_batch(1)
    job = make_job(1)
    root = tmp_path / "work" / "jobs" / job.jid
    (root / "producer").mkdir(parents=True)
    (root / "producer" / "a.txt").write_bytes(b"x" * 1500)
    (root / "manifest.checkm").write_text("#%checkm_0.7\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, root / "escape")
    os.symlink(outside / "secret.txt", root / "secret-link")
    files = browser.get(f"/jobs/{job.jid}/").context["files"]
    assert [(f.name, f.size, f.link) for f in files] == [
        ("escape", None, True),
        ("manifest.checkm", 13, False),
        ("producer/a.txt", 1500, False),
        ("secret-link", None, True),
    ]
    assert "1.5\xa0KB" in browser.get(f"/jobs/{job.jid}/").content.decode()


def test_at_most_500_working_files_are_listed(browser, settings, tmp_path):
    settings.MQ_WORK_DIR = str(tmp_path)
    make_batch(1)
    job = make_job(1)
    root = tmp_path / "jobs" / job.jid
    root.mkdir(parents=True)
    for n in range(510):
        (root / f"f{n:04d}").touch()
    response = browser.get(f"/jobs/{job.jid}/")
    assert len(response.context["files"]) == 500
    assert "Only the first 500 entries are listed." in response.content.decode()


def test_a_job_without_a_work_directory_says_so(browser, settings, tmp_path):
    settings.MQ_WORK_DIR = str(tmp_path)
    make_batch(1)
    make_job(1)
    assert "No working directory for this job." in browser.get(f"/jobs/{jid(1)}/").content.decode()


# --- the live ZooKeeper state ----------------------------------------------------------


@pytest.fixture
def live_zk(store, zk_config, settings):
    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    runtime.close()
    yield store
    runtime.close()


def test_live_shows_zookeepers_values_beside_the_mirror_and_marks_differences(browser, live_zk):
    real_bid = live_zk.new_batches.create_batch({"batchID": "live-1", "collection": "demo"}).id
    real_jid = live_zk.new_jobs.create_job(real_bid, {"collection": "demo"}, priority=3)
    live_zk.moves.transition_job(real_jid, "Estimating", "sizing it")
    record = live_zk.jobs.get_job(real_jid)
    # The mirror is one step behind: it still has the job Pending.
    Job.objects.create(
        jid=real_jid,
        batch_id=real_bid,
        status="Pending",
        priority=3,
        configuration={"collection": "demo"},
        status_version=record.status_version - 1,
        read_at=NOW,
    )
    without = browser.get(f"/jobs/{real_jid}/")
    assert without.context["live"] is None
    response = browser.get(f"/jobs/{real_jid}/?live=1")
    assert response.status_code == 200
    rows = {(r.node.rsplit("/", 1)[1], r.field): r for r in response.context["live"]["rows"]}
    assert rows[("status", "status")].live == "Estimating"
    assert rows[("status", "status")].mirror == "Pending"
    assert rows[("status", "status")].differs
    assert rows[("status", "message")].differs
    assert not rows[("priority", "")].differs
    assert not rows[("configuration", "")].differs
    body = response.content.decode()
    assert '<tr class="differs">' in body
    assert "differ</strong> between the mirror and ZooKeeper" in body


def test_live_finds_no_difference_when_the_mirror_is_up_to_date(browser, live_zk):
    real_bid = live_zk.new_batches.create_batch({"batchID": "live-2", "collection": "demo"}).id
    real_jid = live_zk.new_jobs.create_job(
        real_bid, {"collection": "demo"}, space_needed=10, metadata={"erc_what": "t"}
    )
    record = live_zk.jobs.get_job(real_jid)
    Job.objects.create(
        jid=real_jid,
        batch_id=real_bid,
        status=record.status,
        last_successful_status="",
        priority=record.priority,
        space_needed=10,
        message="",
        last_modified=parse_timestamp(record.last_modified),
        configuration=record.configuration,
        metadata={"erc_what": "t"},
        status_version=record.status_version,
        read_at=NOW,
    )
    live = browser.get(f"/jobs/{real_jid}/?live=1").context["live"]
    assert [r for r in live["rows"] if r.differs] == []
    assert (
        "The mirror matches ZooKeeper." in browser.get(f"/jobs/{real_jid}/?live=1").content.decode()
    )


def test_live_says_so_when_zookeeper_no_longer_has_the_job(browser, live_zk):
    make_batch(1)
    make_job(1)
    body = browser.get(f"/jobs/{jid(1)}/?live=1").content.decode()
    assert f"ZooKeeper has no job {jid(1)}" in body


def test_live_with_zookeeper_unreachable_shows_a_clear_message(browser, settings):
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.ZK_HOSTS, settings.ZK_CHROOT, settings.ZK_TIMEOUT = f"127.0.0.1:{port}", "/x", 1
    runtime.close()
    make_batch(1)
    make_job(1, status="Failed", message="still the mirror's")
    try:
        started = time.monotonic()
        response = browser.get(f"/jobs/{jid(1)}/?live=1")
        assert time.monotonic() - started < 10
    finally:
        runtime.close()
    assert response.status_code == 200
    body = response.content.decode()
    assert "ZooKeeper could not be reached" in body
    assert "still the mirror&#x27;s" in body


def test_the_message_filter_lists_the_jobs_with_that_error(client, django_user_model):
    from django.utils import timezone

    from jobs.models import Job

    client.force_login(viewer(django_user_model.objects.create_user("m", password="pw")))
    now = timezone.now()
    for i, message in enumerate(
        ["404 Not Found at http://x/a", "md5 mismatch", "404 Not Found at http://x/a"]
    ):
        Job.objects.create(jid=f"jid{i:010d}", status="Failed", message=message, read_at=now)
    page = client.get("/jobs/", {"status": "Failed", "message": "404 Not Found at http://x/a"})
    assert b"jid0000000000" in page.content and b"jid0000000002" in page.content
    assert b"jid0000000001" not in page.content
