"""Dashboard, collections, locks and consistency pages, over mirror rows made directly."""

from __future__ import annotations

from datetime import timedelta
from html.parser import HTMLParser
from io import StringIO
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches.models import Batch, Collection
from dashboard import diagram as dg
from dashboard import throughput
from jobs.models import Job, JobEvent, MirrorState
from merritt_queue.core import tree as t
from merritt_queue.core.states import BATCH, JOB, JOB_STEPS
from merritt_queue.project import runtime
from tests.roles import viewer
from ui.signatures import cause_of

XSS = '<script>alert("x")</script>'


class Tags(HTMLParser):
    """Every start tag as (tag, attrs, id of the enclosing <svg>), and the text of <title>s."""

    def __init__(self, html: str):
        super().__init__()
        self.tags: list[tuple[str, dict, str]] = []
        self.svg = ""
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg":
            self.svg = attrs.get("id", "")
        self.tags.append((tag, attrs, self.svg))

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg = ""

    def find(self, tag: str, cls: str = "", svg: str | None = None) -> list[dict]:
        return [
            a
            for tg, a, s in self.tags
            if tg == tag
            and (not cls or cls in a.get("class", "").split())
            and (svg is None or s == svg)
        ]


def query(href: str) -> dict[str, list[str]]:
    parts = urlsplit(href)
    return {"path": [parts.path], **parse_qs(parts.query, keep_blank_values=True)}


def make_batch(bid: str, status: str = "Processing", **kw) -> Batch:
    return Batch.objects.create(bid=bid, status=status, read_at=timezone.now(), **kw)


def make_job(jid: str, status: str = "Pending", **kw) -> Job:
    kw.setdefault("batch_id", "bid0000000001")
    kw.setdefault("signature", cause_of(kw.get("message", "")))  # as the mirror writes it
    return Job.objects.create(jid=jid, status=status, read_at=timezone.now(), **kw)


def make_jobs(n: int, start: int = 1, **kw) -> None:
    statuses = JOB.statuses
    Job.objects.bulk_create(
        Job(
            jid=f"jid{i:010d}",
            batch_id=f"bid{i % 7:010d}",
            status=statuses[i % len(statuses)],
            collection=f"coll{i % 5}",
            message=f"error {i % 13}" if statuses[i % len(statuses)] == "Failed" else "",
            signature="error <n>" if statuses[i % len(statuses)] == "Failed" else "<none>",
            locked=i % 17 == 0,
            read_at=timezone.now(),
            **kw,
        )
        for i in range(start, start + n)
    )


@pytest.fixture(autouse=True)
def empty_cache():
    """Some aggregates are cached for seconds: each test starts with none."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def client(client, db):
    user = viewer(User.objects.create_user("librarian", password="pw"))
    client.force_login(user)
    return client


def get(client, url: str):
    response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


# --- dashboard --------------------------------------------------------------------


def test_dashboard_shows_a_count_for_every_state_linked_to_its_filtered_list(client):
    for i, status in enumerate(JOB.statuses):
        for k in range(i + 1):
            make_job(f"jid{i:04d}{k:06d}", status)
    for i, status in enumerate(BATCH.statuses):
        for k in range(2 * i + 1):
            make_batch(f"bid{i:04d}{k:06d}", status)

    tags = Tags(get(client, "/"))

    jobs = {a["data-status"]: a for a in tags.find("a", "node", svg="machine-job")}
    assert set(jobs) == set(JOB.statuses)
    for i, status in enumerate(JOB.statuses):
        assert jobs[status]["data-count"] == str(i + 1)
        assert query(jobs[status]["href"]) == {"path": ["/jobs/"], "status": [status]}
    batches = {a["data-status"]: a for a in tags.find("a", "node", svg="machine-batch")}
    assert set(batches) == set(BATCH.statuses)
    for i, status in enumerate(BATCH.statuses):
        assert batches[status]["data-count"] == str(2 * i + 1)
        assert query(batches[status]["href"]) == {"path": ["/batches/"], "status": [status]}


def test_dashboard_shows_zero_for_states_nobody_is_in_and_names_unknown_statuses(client):
    make_job("jid0000000001", "Completed")
    make_job("jid0000000002", "Bogus")
    html = get(client, "/")
    nodes = {a["data-status"]: a for a in Tags(html).find("a", "node", svg="machine-job")}
    assert nodes["Pending"]["data-count"] == "0" and "zero" in nodes["Pending"]["class"]
    assert nodes["Completed"]["data-count"] == "1"
    assert "status no machine knows" in html and "/jobs/?status=Bogus" in html


@pytest.mark.parametrize("machine", [JOB, BATCH], ids=lambda m: m.name)
def test_the_diagram_has_one_node_per_status_and_one_edge_per_transition(client, machine):
    tags = Tags(get(client, "/"))
    svg = f"machine-{machine.name}"
    nodes = [a["data-status"] for a in tags.find("a", "node", svg=svg)]
    assert sorted(nodes) == sorted(machine.statuses)
    edges = [(p["data-from"], p["data-to"]) for p in tags.find("path", "edge", svg=svg)]
    expected = [(src, dst) for src, dsts in machine.transitions.items() for dst in dsts]
    assert sorted(edges) == sorted(expected)


@pytest.mark.parametrize("machine", [JOB, BATCH], ids=lambda m: m.name)
def test_the_diagram_layout_follows_the_machine(machine):
    d = dg.diagram(machine, {}, lambda s: f"/x/?status={s}")
    path = dg.success_path(machine)
    assert path[0] == "Pending" and path[-1] == "Completed"
    # The success path is one row, left to right.
    row = [d.box(s) for s in path]
    assert len({b.y for b in row}) == 1
    assert [b.x for b in row] == sorted(b.x for b in row)
    # Held above the row, Failed and Deleted below it; no two boxes overlap.
    assert d.box("Held").y < row[0].y < d.box(machine.failed).y == d.box(machine.deleted).y
    for i, a in enumerate(d.boxes):
        for b in d.boxes[i + 1 :]:
            apart = a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
            assert apart, (a.status, b.status)
    # Every arrow stays inside the picture, and a back-and-forth pair does not overlap.
    for a in d.arrows:
        assert 0 <= min(a.x1, a.x2) and max(a.x1, a.x2) <= d.width
        assert 0 <= min(a.y1, a.y2) and max(a.y1, a.y2) <= d.height
    lines = {(a.src, a.dst): (a.x1, a.y1, a.x2, a.y2) for a in d.arrows}
    for (src, dst), (x1, y1, x2, y2) in lines.items():
        if (dst, src) in lines:
            assert (x2, y2, x1, y1) != lines[(dst, src)]


def test_failed_jobs_are_grouped_by_the_step_that_failed(client):
    for k in range(3):
        make_job(f"jid000000010{k}", "Failed", last_successful_status="Provisioning")
    make_job("jid0000000200", "Failed", last_successful_status="Recording")
    make_job("jid0000000300", "Failed", last_successful_status="")
    make_job("jid0000000301", "Failed", last_successful_status="Held")
    make_job("jid0000000400", "Downloading", last_successful_status="Provisioning")

    html = get(client, "/")
    table = html.split("Failed jobs by step", 1)[1].split("</table>", 1)[0]
    links = {}
    for a in Tags(table).find("a"):
        q = query(a["href"])
        assert q["path"] == ["/jobs/"] and q["status"] == ["Failed"]
        links[q["failed_at"][0]] = q
    # The step shown is the one after the last successful one, in the machine's order;
    # failing while Pending (never started, or after a hold) is one row.
    assert list(links) == ["Pending", "Downloading", "Notify"]
    assert table.index(">Pending<") < table.index(">Downloading<") < table.index(">Notify<")
    assert 'failed_at=Pending">2</a>' in table and 'failed_at=Downloading">3</a>' in table
    assert "none, Held" in table or "Held, none" in table


def test_top_ten_causes_of_failure_with_counts_link_to_their_jobs(client):
    n = 0
    for m in range(12):
        for _ in range(m + 1):
            n += 1
            make_job(f"jid{n:010d}", "Failed", message=f"message {'abcdefghijkl'[m] * 3}")
    make_job("jid0000009999", "Completed", message="not a failure")

    html = get(client, "/")
    part = html.split("Top error messages", 1)[1].split("</table>", 1)[0]
    links = [query(a["href"]) for a in Tags(part).find("a", "msg")]
    expected = [f"message {'abcdefghijkl'[m] * 3}" for m in range(11, 1, -1)]
    assert [q["signature"][0] for q in links] == expected
    assert all(q["status"] == ["Failed"] and q["path"] == ["/jobs/"] for q in links)
    assert ">12</a></td>" in part
    assert "not a failure" not in html


def test_throughput_shows_completed_jobs_per_hour_over_the_last_day(client):
    now = timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    times = [hour, hour, now, hour - timedelta(minutes=299), hour - timedelta(minutes=241)]
    for k, at in enumerate([*times, now - timedelta(hours=25)]):
        JobEvent.objects.create(jid=f"jid{k:010d}", to_status="Completed", at=at)
    JobEvent.objects.create(jid="jid0000000099", to_status="Failed", at=now)

    tags = Tags(get(client, "/"))
    bars = tags.find("rect", "bar", svg="throughput-day")
    assert len(bars) == 24
    counts = [int(b["data-count"]) for b in bars]
    assert sorted(c for c in counts if c) == [2, 3]
    tallest = max(bars, key=lambda b: int(b["data-count"]))
    other = next(b for b in bars if b["data-count"] == "2")
    assert float(tallest["height"]) > float(other["height"]) > 1


def finished(jid: str, status: str, at, submitted=None) -> None:
    """A job's Completed or Failed row, and when given its batch, submitted then."""
    bid = ""
    if submitted is not None:
        bid = make_batch(f"bid{jid[3:]}", "Processing", submitted=submitted).bid
    JobEvent.objects.create(jid=jid, bid=bid, to_status=status, at=at, status_version=9)


def test_throughput_counts_completed_and_failed_per_hour_and_per_day(client):
    now = timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    finished("jid0000000001", "Completed", hour)
    finished("jid0000000002", "Completed", now)
    finished("jid0000000003", "Failed", now)
    finished("jid0000000004", "Failed", hour - timedelta(hours=3))
    finished("jid0000000005", "Completed", now - timedelta(days=2))
    finished("jid0000000006", "Failed", now - timedelta(days=3))
    finished("jid0000000007", "Completed", now - timedelta(days=8))  # out of both windows
    JobEvent.objects.create(jid="jid0000000008", to_status="Storing", at=now)  # not finished

    html = get(client, "/")
    tags = Tags(html)
    day = tags.find("rect", "bar", svg="throughput-day")
    assert len(day) == 24 and int(day[-1]["data-count"]) == 2
    failed_day = [
        int(r["data-count"]) for r in tags.find("rect", "bar-failed", svg="throughput-day")
    ]
    assert failed_day == [1, 1]
    week = tags.find("rect", "bar", svg="throughput-week")
    assert len(week) == 7 and int(week[-1]["data-count"]) == 2
    assert int(week[-3]["data-count"]) == 1
    assert sum(int(r["data-count"]) for r in week) == 3
    failed_week = tags.find("rect", "bar-failed", svg="throughput-week")
    assert sum(int(r["data-count"]) for r in failed_week) == 3
    # The figures in words, and the same as tables.
    assert (
        '<strong>2</strong> completed, <strong class="failed">2</strong> failed in the last 24 h'
        in html
    )
    assert (
        '<strong>3</strong> completed, <strong class="failed">3</strong> failed in the last 7 days'
        in html
    )
    table = html.split('id="throughput-week-table"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 8
    today_failed = 1 + ((hour - timedelta(hours=3)).date() == now.date())
    assert f'<td class="num">2</td><td class="num">{today_failed}</td></tr></tbody>' in table
    svg = html.split('id="throughput-day"', 1)[1].split("</svg>", 1)[0]
    assert "2 completed, 1 failed</title>" in svg


def test_throughput_gives_the_median_time_from_submission_to_completed(client):
    now = timezone.now()
    for k, minutes in enumerate([1, 2, 10]):  # today
        finished(f"jid{k:010d}", "Completed", now, submitted=now - timedelta(minutes=minutes))
    for k, minutes in enumerate([30, 40, 50], start=10):  # earlier this week
        at = now - timedelta(days=2)
        finished(f"jid{k:010d}", "Completed", at, submitted=at - timedelta(minutes=minutes))
    finished("jid0000000020", "Completed", now)  # its batch unknown: left out
    finished("jid0000000021", "Failed", now, submitted=now - timedelta(hours=5))

    html = get(client, "/")
    median = html.split('id="median"', 1)[1].split("</p>", 1)[0]
    assert "<strong>2 min</strong> over the last 24 h (3 jobs)" in median
    # Six jobs: the mean of the third and the fourth, 10 and 30 minutes.
    assert "<strong>20 min</strong> over the last 7 days (6 jobs)" in median


def test_throughput_reads_the_timeline_by_its_status_and_time_index(client):
    if connection.vendor != "sqlite":
        pytest.skip("the plan's words are SQLite's")
    with CaptureQueriesContext(connection) as ctx:
        throughput.throughput()
    plans = []
    with connection.cursor() as cursor:
        for q in ctx.captured_queries:
            cursor.execute(f"EXPLAIN QUERY PLAN {q['sql']}")
            plans.append(" | ".join(row[-1] for row in cursor.fetchall()))
    assert len(plans) == 2
    for plan in plans:  # never a scan of the whole timeline
        assert "USING COVERING INDEX jobevent_status_at_bid (to_status=? AND at>" in plan, plan
        assert "SCAN c" not in plan and "SCAN jobs_jobevent" not in plan, plan


def test_throughput_says_so_when_nothing_completed(client):
    html = get(client, "/")
    assert "<strong>—</strong> over the last 24 h (0 jobs)" in html
    tags = Tags(html)
    assert all(r["height"] == "1" for r in tags.find("rect", "bar", svg="throughput-week"))


def test_dashboard_shows_the_queue_pause_and_collections_on_hold(client):
    html = get(client, "/")
    assert "the mirror has not read the locks yet" in html
    MirrorState.objects.create(
        name="locks", at=timezone.now(), detail={"queue_paused": True, "locks": []}
    )
    Collection.objects.create(mnemonic="ucb", held=True, held_by="ann", held_reason="bad manifests")
    Collection.objects.create(mnemonic="ucla", held=False)
    html = get(client, "/")
    assert 'class="badge paused"' in html and "no new work starts" in html
    assert "bad manifests" in html and "/jobs/?collection=ucb" in html
    assert "/jobs/?collection=ucla" not in html

    MirrorState.objects.filter(name="locks").update(detail={"queue_paused": False})
    assert 'class="badge running">running' in get(client, "/")


def test_dashboard_query_count_does_not_grow_with_the_number_of_jobs(client):
    def count() -> int:
        cache.clear()
        with CaptureQueriesContext(connection) as ctx:
            get(client, "/")
        return len(ctx.captured_queries)

    make_jobs(10)
    # Capacity ahead previews a held collection's release in two queries, whatever their
    # number (ui.ahead): one is held from the start.
    Collection.objects.create(mnemonic="h-first", held=True)
    small = count()
    make_jobs(490, start=11)
    JobEvent.objects.bulk_create(
        JobEvent(jid=f"jid{i:010d}", to_status="Completed", at=timezone.now()) for i in range(500)
    )
    Collection.objects.bulk_create(Collection(mnemonic=f"h{i}", held=True) for i in range(20))
    assert Job.objects.count() == 500
    # One of them reads the maintenance windows ("Scheduled next"); the Throughput panel's
    # two (dashboard.throughput) and Capacity ahead's three (ui.ahead) are among them; four
    # say why jobs wait (jobs.waitquery: the windows on, the locks, the held collections, the
    # GROUP BY); one counts the batches awaiting approval, one the jobs awaiting approval of a
    # destructive update; with the cache empty, the jobs and the batches are counted twice each
    # (the settled statuses, then the others: dashboard.queries.status_counts); one counts the
    # access queue's requests by queue and state (accessui).
    assert 0 < count() == small <= 26


def test_pages_need_a_login(client):
    client.logout()
    for url in ["/", "/collections/", "/locks/", "/consistency/"]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_messages_reasons_and_paths_are_escaped(client):
    make_job("jid0000000001", "Failed", message=XSS, title=XSS, collection="c1")
    Collection.objects.create(mnemonic="c1", held=True, held_by=XSS, held_reason=XSS)
    MirrorState.objects.create(
        name="locks",
        at=timezone.now(),
        detail={"queue_paused": False, "locks": [{"path": f"/locks/storage/{XSS}", "owner": XSS}]},
    )
    MirrorState.objects.create(
        name="consistency",
        at=timezone.now(),
        detail={
            "total": 1,
            "unrepaired": 1,
            "findings": [{"kind": XSS, "path": XSS, "reason": XSS, "repair": XSS}],
        },
    )
    for url in ["/", "/collections/", "/locks/", "/consistency/"]:
        html = get(client, url)
        assert XSS not in html, url
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html, url


def test_list_pages_include_the_auto_refresh(client):
    for url in ["/", "/collections/", "/locks/", "/consistency/"]:
        html = get(client, url)
        assert "data-refresh " in html or "data-refresh>" in html, url
        assert "static/refresh.js" in html and "data-refresh-toggle" in html, url


# --- collections ------------------------------------------------------------------


def test_collections_show_counts_per_state_and_their_hold(client):
    held_at = timezone.now() - timedelta(hours=3)
    Collection.objects.create(
        mnemonic="ucb", held=True, held_by="ann", held_reason="storage full", held_at=held_at
    )
    Collection.objects.create(mnemonic="empty")
    for k in range(3):
        make_job(f"jid000000000{k}", "Failed", collection="ucb")
    make_job("jid0000000010", "Completed", collection="ucb")
    make_job("jid0000000020", "Pending", collection="jobs-only")
    make_batch("bid0000000001", collection="ucb")

    html = get(client, "/collections/")
    rows = html.split("<tbody>", 1)[1].split("<tr ")[1:]
    by_name = {r.split('data-collection="', 1)[1].split('"', 1)[0]: r for r in rows}
    assert list(by_name) == ["ucb", "empty", "jobs-only"]  # held first
    ucb = by_name["ucb"]
    assert "storage full" in ucb and "by ann" in ucb and "3\xa0hours ago" in ucb
    links = [query(a["href"]) for a in Tags(ucb).find("a")]
    assert {q["status"][0] for q in links if "status" in q} == {"Failed", "Completed"}
    assert '/jobs/?collection=ucb&amp;status=Failed" class="status-failed">3<' in ucb
    assert '/batches/?collection=ucb">1<' in ucb
    assert "/jobs/?collection=jobs-only&amp;status=Pending" in by_name["jobs-only"]
    assert "held" not in by_name["empty"].split(">", 1)[0]


def test_collections_query_count_is_constant(client):
    def count() -> int:
        cache.clear()
        with CaptureQueriesContext(connection) as ctx:
            get(client, "/collections/")
        return len(ctx.captured_queries)

    make_jobs(10)
    small = count()
    make_jobs(300, start=11)
    Collection.objects.bulk_create(Collection(mnemonic=f"c{i}", held=i % 2) for i in range(30))
    assert 0 < count() == small


# --- locks ------------------------------------------------------------------------


def test_locks_page_shows_pause_holds_locks_with_age_and_what_runs(client):
    now = timezone.now()
    created = now - timedelta(minutes=42)
    MirrorState.objects.create(
        name="locks",
        at=now,
        detail={
            "queue_paused": True,
            "locks": [
                {"path": "/locks/queue/ingest", "kind": "queue", "ctime": None, "owner": ""},
                {
                    "path": "/locks/storage/ark_13030_m5abc",
                    "kind": "storage",
                    "ctime": int(created.timestamp() * 1000),
                    "owner": "jid0000000007",
                },
                {
                    "path": "/locks/inventory/ark_13030_m5xyz",
                    "ctime": created.isoformat(),
                    "owner": "0x1234",
                },
                {"path": "/locks/localid/abc", "kind": "localid", "ctime": 0, "owner": ""},
            ],
        },
    )
    Collection.objects.create(mnemonic="ucb", held=True, held_by="ann", held_reason="audit")
    make_job("jid0000000007", "Storing", locked=True, collection="ucb", last_modified=created)
    make_job("jid0000000008", "Storing", locked=False)
    make_batch("bid0000000003", "Reporting", locked=True)

    html = get(client, "/locks/")
    assert "paused" in html and "/locks/queue/ingest exists" in html
    assert "audit" in html and "ann" in html
    storage = html.split('data-kind="storage"', 1)[1].split("</section>", 1)[0]
    assert "/locks/storage/ark_13030_m5abc" in storage and "jid0000000007" in storage
    assert "<td>42 min</td>" in storage
    inventory = html.split('data-kind="inventory"', 1)[1].split("</section>", 1)[0]
    assert "ark_13030_m5xyz" in inventory and "<td>42 min</td>" in inventory
    assert "/locks/localid/abc" in html.split('data-kind="localid"', 1)[1]
    running = html.split("Running now", 1)[1]
    assert 'href="/jobs/jid0000000007/"' in running and "jid0000000008" not in running
    assert 'href="/batches/bid0000000003/"' in running


def test_locks_page_says_when_the_mirror_has_not_read_the_locks(client):
    html = get(client, "/locks/")
    assert "the mirror has not read the locks yet" in html
    assert "Nothing holds a lock." in html


# --- consistency ------------------------------------------------------------------


def test_consistency_page_before_any_check(client):
    html = get(client, "/consistency/")
    assert "never run" in html and "python manage.py check_tree" in html


def test_consistency_page_shows_the_last_run_and_filters_by_kind(client):
    findings = [
        {"kind": "missing-index", "path": "/jobs/states/pending/05-jid1", "reason": "Job jid1",
         "repair": "create it", "repaired": True},
        {"kind": "foreign-index", "path": "/jobs/states/pending/junk", "reason": "not a job",
         "repair": None, "repaired": False},
    ]  # fmt: skip
    MirrorState.objects.create(
        name="consistency",
        at=timezone.now() - timedelta(hours=2),
        detail={"repair": True, "total": 2, "repaired": 1, "unrepaired": 1, "findings": findings},
    )
    html = get(client, "/consistency/")
    assert "2\xa0hours ago" in html and "with --repair" in html
    assert "/jobs/states/pending/05-jid1" in html and "repaired</span> create it" in html
    assert "fix by hand" in html
    html = get(client, "/consistency/?kind=foreign-index")
    assert "/jobs/states/pending/junk" in html and "05-jid1" not in html


@pytest.fixture
def settings_on_chroot(zk_config):
    with override_settings(ZK_HOSTS=zk_config.hosts, ZK_CHROOT=zk_config.chroot):
        yield
    runtime.close()


@pytest.mark.django_db
def test_check_tree_saves_its_findings_for_the_page(store, settings_on_chroot, client):
    bid = store.new_batches.create_batch({}).id
    jid = store.new_jobs.create_job(bid, {})
    store.client.delete(t.job_index("Pending", 5, jid))
    with pytest.raises(SystemExit):
        call_command("check_tree", stdout=StringIO())

    state = MirrorState.objects.get(name="consistency")
    assert state.detail["total"] == 1 and state.detail["unrepaired"] == 1
    assert state.detail["repair"] is False
    [finding] = state.detail["findings"]
    assert finding["kind"] == "missing-index" and finding["repaired"] is False
    html = get(client, "/consistency/")
    assert t.job_index("Pending", 5, jid) in html and "would repair" in html

    call_command("check_tree", "--repair", stdout=StringIO())
    state.refresh_from_db()
    assert state.detail["repaired"] == 1 and state.detail["findings"][0]["repaired"] is True
    assert 'class="badge running" href="/consistency/">0 open findings' in get(client, "/")


def test_steps_in_the_diagram_are_the_machine_steps():
    d = dg.diagram(JOB, {}, str)
    row = sorted((b for b in d.boxes if b.y == d.box("Pending").y), key=lambda b: b.x)
    assert [b.status for b in row] == ["Pending", *JOB_STEPS, "Completed"]


def test_cached_aggregates_are_reused_for_a_few_seconds(client):
    make_job("jid0000000001", "Completed", collection="ucb")
    JobEvent.objects.create(jid="jid0000000001", to_status="Completed", at=timezone.now())
    get(client, "/")
    get(client, "/collections/")
    make_job("jid0000000002", "Failed", collection="ucb")
    JobEvent.objects.create(jid="jid0000000002", to_status="Completed", at=timezone.now())
    # The state counts are live; throughput and per-collection counts come from the cache.
    tags = Tags(get(client, "/"))
    nodes = tags.find("a", "node", svg="machine-job")
    assert {a["data-status"]: a["data-count"] for a in nodes}["Failed"] == "1"
    day = {"svg": "throughput-day"}
    assert sum(int(b["data-count"]) for b in tags.find("rect", "bar", **day)) == 1
    assert "status=Failed" not in get(client, "/collections/").split("<tbody>", 1)[1]
    cache.clear()
    assert sum(int(b["data-count"]) for b in Tags(get(client, "/")).find("rect", "bar", **day)) == 2


@pytest.mark.django_db
def test_locks_page_reads_what_the_reconciler_stores(store, make_store, client):
    """End to end: the tree's pause, hold, storage lock and job lock -> full_reconcile -> pages."""
    from mirror.facade import full_reconcile

    bid = store.new_batches.create_batch({"profile": "p"}).id
    jid = store.new_jobs.create_job(bid, {"collection": "ucb"})
    store.pause.pause_queue()
    store.holds.hold_collection("ucb", by="admin:ann", reason="storage migration")
    store.locks.lock_storage("ark:/13030/m5abc", owner=jid)
    store.locks.lock_inventory("ark:/13030/m5xyz")
    assert make_store().job_locks.lock_job(jid) is not None  # a worker's session holds the job
    full_reconcile(store)

    html = get(client, "/locks/")
    assert 'class="badge paused"' in html and "since" in html
    storage = html.split('data-kind="storage"', 1)[1].split("</section>", 1)[0]
    assert "/locks/storage/ark_13030_m5abc" in storage
    assert f'href="/jobs/{jid}/"' in storage  # the job that took the storage lock
    inventory = html.split('data-kind="inventory"', 1)[1].split("</section>", 1)[0]
    assert "/locks/inventory/ark_13030_m5xyz" in inventory and "0x" in inventory
    assert "storage migration" in html and "admin:ann" in html
    running = html.split("Running now", 1)[1]
    assert f'href="/jobs/{jid}/"' in running
    locked_for = running.split(f"/jobs/{jid}/", 1)[1].split("</tr>", 1)[0]
    assert "<td>Pending</td><td>0 s</td>" in locked_for  # the job lock's age is known

    home = get(client, "/")
    assert 'class="badge paused"' in home and "/jobs/?collection=ucb" in home


def test_ages_are_short_and_readable():
    from dashboard.queries import age

    now = timezone.now()
    assert age(None, now) == "—"
    assert age(now - timedelta(seconds=45), now) == "45 s"
    assert age(now - timedelta(minutes=12, seconds=5), now) == "12 min"
    assert age(now - timedelta(hours=3, minutes=5), now) == "3 h 5 min"
    assert age(now - timedelta(days=2, hours=4, minutes=1), now) == "2 d 4 h"
    assert age(now + timedelta(seconds=5), now) == "0 s"  # a clock a little ahead
