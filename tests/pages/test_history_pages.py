"""The record where people read it: the job's and the batch's timelines (version order,
time in each state, versions not observed, who, admin actions inline) and its exports
(CSV and JSON, the whole record filtered, a depositor's scope, CSV injection)."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches.models import BatchEvent
from door.rights import grant_depositor
from jobs.models import JobEvent
from jobs.timeline_view import duration_text, who_of
from steering.models import VIEWER, AdminAction, AdminActionItem
from tests.pages.test_pages_batches_jobs import bid, jid, make_batch, make_job
from tests.roles import viewer

pytestmark = pytest.mark.django_db

BASE = timezone.make_aware(datetime(2026, 3, 10, 12, 0))  # noon in the site's zone


@pytest.fixture
def browser(client, django_user_model):
    client.force_login(viewer(django_user_model.objects.create_user("librarian")))
    return client


def event(n: int, version: int, old: str, new: str, seconds: int, **fields) -> JobEvent:
    """Job ``n``'s row for ``version``, ``seconds`` after BASE."""
    values = {"bid": bid(1), "exact": True, "actor": "worker host-a:101"} | fields
    return JobEvent.objects.create(
        jid=jid(n),
        from_status=old,
        to_status=new,
        at=BASE + timedelta(seconds=seconds),
        status_version=version,
        **values,
    )


def batch_event(n: int, version: int, old: str, new: str, seconds: int, **fields) -> BatchEvent:
    values = {"exact": True, "actor": "dispatcher host-a:7"} | fields
    return BatchEvent.objects.create(
        bid=bid(n),
        from_status=old,
        to_status=new,
        at=BASE + timedelta(seconds=seconds),
        status_version=version,
        **values,
    )


def timeline(response):
    return response.context["timeline"].rows


def admin_action(username: str, name: str, reason: str, item: str, after: int) -> AdminAction:
    record = AdminAction.objects.create(
        username=username, action=name, scope=name.split(".")[0], reason=reason, token=reason
    )
    AdminActionItem.objects.create(
        admin_action=record, item_id=item, after_version=after, result="done"
    )
    return record


# --- the job's timeline ----------------------------------------------------------------


def test_rows_are_in_version_order_whatever_their_times(browser):
    make_batch(1)
    make_job(1, "Provisioning")
    # The worker's clock is behind the mirror's: version 2 carries an earlier time.
    event(1, 0, "", "Pending", 0, actor="Merritt ingest")
    event(1, 1, "Pending", "Estimating", 60)
    event(1, 2, "Estimating", "Provisioning", 30)
    response = browser.get(f"/jobs/{jid(1)}/")
    assert [r.version for r in timeline(response)] == [0, 1, 2]
    body = response.content.decode()
    rows = body[body.index('<table class="mq-table timeline">') :]
    assert rows.index('data-version="0"') < rows.index('data-version="1"')
    assert rows.index('data-version="1"') < rows.index('data-version="2"')
    # Clocks that disagree give no duration rather than a negative one.
    assert timeline(response)[1].duration is None and timeline(response)[1].duration_text == "?"


def test_time_in_each_state_runs_until_the_next_row_and_so_far_for_the_last(browser):
    make_batch(1)
    make_job(1, "Downloading")
    event(1, 0, "", "Pending", 0)
    event(1, 1, "Pending", "Estimating", 90)
    event(1, 2, "Estimating", "Provisioning", 90 + 3600 + 300)
    event(1, 3, "Provisioning", "Downloading", 90 + 3600 + 300 + 86400 - 7200)
    rows = timeline(browser.get(f"/jobs/{jid(1)}/"))
    assert [r.duration_text for r in rows[:3]] == ["1 min 30 s", "1 h 5 min", "22 h"]
    assert rows[3].duration_text.endswith(" so far")


def test_a_finished_job_has_no_so_far(browser):
    make_batch(1)
    make_job(1, "Completed")
    event(1, 0, "Notify", "Completed", 0)
    (row,) = timeline(browser.get(f"/jobs/{jid(1)}/"))
    assert row.duration is None and row.duration_text == ""


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (59, "59 s"), (60, "1 min"), (3599, "59 min 59 s"), (7200, "2 h"),
     (90000, "1 d 1 h"), (86400 * 3, "3 d")],
)  # fmt: skip
def test_durations_are_short(seconds, text):
    assert duration_text(timedelta(seconds=seconds)) == text


def test_versions_not_observed_are_told_never_invented(browser):
    make_batch(1)
    make_job(1, "Recording")
    event(1, 2, "Estimating", "Provisioning", 0)  # the first row kept: 0 and 1 not recorded
    # Seen as a jump from 2 to 5: the mirror writes the jump's words before the message.
    jump_text = "3 changes not observed; now Storing: storing version 2"
    event(1, 5, "", "Storing", 100, exact=False, actor="watch", message=jump_text)
    event(1, 8, "Storing", "Recording", 300)  # told by its writer, after 2 unseen versions
    response = browser.get(f"/jobs/{jid(1)}/")
    first, jump, exact = timeline(response)
    assert first.before == "Changes before status version 2 were not recorded."
    assert jump.change == "3 changes not observed; now Storing" and jump.before == ""
    assert jump.message == "storing version 2"  # its own words, not the jump's twice
    assert exact.before == "2 changes not observed" and exact.change == ""
    # Time in a state followed by unseen changes is a bound, not a measure.
    assert first.duration_text == "≤ 1 min 40 s" and jump.duration_text == "≤ 3 min 20 s"
    body = response.content.decode()
    assert "3 changes not observed; now Storing" in body
    assert '<tr class="gap"><td colspan="6">2 changes not observed</td></tr>' in body
    # The jump is no "— → Storing" and no invented Provisioning → Storing.
    assert 'Provisioning</span> → <span class="st st-storing">' not in body


def test_a_first_row_without_its_previous_state_says_earlier_changes_were_not_recorded(browser):
    make_batch(1)
    make_job(1, "Failed")
    event(1, 4, "", "Failed", 0, exact=False, actor="reconcile")
    (row,) = timeline(browser.get(f"/jobs/{jid(1)}/"))
    assert row.change == "earlier changes not recorded; now Failed"


def test_versions_the_mirror_has_no_row_for_yet_are_told_after_the_last(browser):
    make_batch(1)
    make_job(1, "Storing", status_version=5)
    event(1, 0, "", "Pending", 0)
    event(1, 1, "Pending", "Estimating", 10)
    rows = timeline(browser.get(f"/jobs/{jid(1)}/"))
    assert rows[-1].after == "4 later changes not recorded yet; now Storing"
    assert rows[-1].duration is None  # no "so far": the job has left Estimating


def test_inexact_rows_are_marked_with_a_tooltip(browser):
    make_batch(1)
    make_job(1, "Estimating")
    event(1, 0, "", "Pending", 0)
    event(1, 1, "Pending", "Estimating", 10, exact=False, actor="watch")
    body = browser.get(f"/jobs/{jid(1)}/").content.decode()
    assert body.count('class="inexact-mark"') == 1
    assert 'title="Seen by the mirror, not told by its writer' in body
    assert '<tr class="event inexact" data-version="1">' in body


@pytest.mark.parametrize(
    ("actor", "text", "kind"),
    [
        ("admin:ada", "ada", "admin"),
        ("submission:dee", "dee", "submitter"),
        ("worker host-a:4242", "worker on host-a", "worker"),
        ("dispatcher host-b:7", "dispatcher on host-b", "dispatcher"),
        ("cleanup", "cleanup", "command"),
        ("check_tree --repair", "check_tree --repair", "command"),
        ("Merritt ingest", "Merritt ingest", "other-writer"),
        ("reconcile", "found by a full reconcile (writer unknown)", "mirror"),
        ("watch", "seen by the mirror (writer unknown)", "mirror"),
        ("", "—", ""),
    ],
)
def test_who_is_the_person_the_process_or_the_command(actor, text, kind):
    assert (who_of(actor).text, who_of(actor).kind) == (text, kind)


def test_the_admin_action_behind_a_version_is_shown_inline(browser):
    make_batch(1)
    make_job(1, "Estimating", retry_count=1)
    event(1, 0, "", "Pending", 0)
    event(1, 1, "Pending", "Estimating", 10)
    event(1, 2, "Estimating", "Failed", 20, message="download failed: HTTP 404")
    event(1, 3, "Failed", "Estimating", 30, actor="admin:ada", retry_count=1)
    resume = admin_action("ada", "job.resume", "the file is there now", jid(1), 3)
    admin_action("bob", "job.hold", "another job's", jid(2), 3)  # another item
    response = browser.get(f"/jobs/{jid(1)}/")
    rows = timeline(response)
    assert [len(r.admin) for r in rows] == [0, 0, 0, 1]
    note = rows[3].admin[0]
    assert (note.label, note.username, note.reason) == ("Resume (job)", "ada", resume.reason)
    assert note.url == f"/actions/{resume.pk}/"
    assert rows[3].who.text == "ada" and rows[3].retry_count == 1
    body = response.content.decode()
    row3 = body[body.index('data-version="3"') :]
    assert row3.index(f'href="/actions/{resume.pk}/"') < row3.index("</tbody>")
    assert "<q>the file is there now</q>" in row3


def test_the_timeline_costs_the_same_queries_for_3_rows_as_for_100(browser):
    make_batch(1)
    make_job(1, "Failed")
    make_job(2, "Failed")
    for n, count in ((1, 3), (2, 100)):
        for v in range(count):
            event(n, v, "Failed" if v else "", "Estimating" if v % 2 else "Failed", v)
            if v % 2:
                admin_action("ada", "job.resume", f"r{n}-{v}", jid(n), v)
    counts = []
    for n in (1, 2):
        with CaptureQueriesContext(connection) as ctx:
            assert browser.get(f"/jobs/{jid(n)}/").status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]


def test_the_job_page_links_its_exports(browser):
    make_batch(1)
    make_job(1)
    body = browser.get(f"/jobs/{jid(1)}/").content.decode()
    assert f'href="/jobs/{jid(1)}/history.csv"' in body
    assert f'href="/jobs/{jid(1)}/history.json"' in body


# --- the batch's timeline --------------------------------------------------------------


def test_the_batch_page_shows_the_batchs_own_timeline_without_retries(browser):
    make_batch(1, "Completed")
    make_job(1, "Completed")
    batch_event(1, 0, "", "Pending", 0, actor="Merritt ingest")
    batch_event(1, 2, "Processing", "Reporting", 50)  # earlier than version 1's time
    batch_event(1, 1, "Pending", "Processing", 120)
    batch_event(1, 3, "Reporting", "Completed", 200)
    held = admin_action("ada", "batch.hold", "wait for the migration", bid(1), 1)
    event(1, 0, "", "Pending", 5)  # a job's row: on the job's page, not here
    response = browser.get(f"/batches/{bid(1)}/")
    rows = timeline(response)
    assert [(r.version, r.to_status) for r in rows] == [
        (0, "Pending"),
        (1, "Processing"),
        (2, "Reporting"),
        (3, "Completed"),
    ]
    assert all(r.retry_count is None for r in rows)
    assert rows[0].who.text == "Merritt ingest" and rows[1].who.text == "dispatcher on host-a"
    assert rows[1].admin[0].url == f"/actions/{held.pk}/"
    assert rows[3].duration_text == ""  # Completed: finished
    body = response.content.decode()
    section = body[body.index('<section id="timeline">') :]
    assert "<th>Retries</th>" not in section[: section.index("</table>")]
    assert body.index('<section id="timeline">') < body.index("<h2>Jobs</h2>")
    assert f'href="/batches/{bid(1)}/history.csv"' in body


# --- exports ---------------------------------------------------------------------------


def read_csv(response) -> list[dict]:
    assert response.streaming
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def read_json(response) -> dict:
    assert response.streaming
    return json.loads(b"".join(response.streaming_content))


def two_batches():
    make_batch(1, "Processing")
    make_batch(2, "Completed", collection="other")
    make_job(1, "Estimating")
    make_job(2, "Completed", batch=2, collection="other")
    batch_event(1, 0, "", "Pending", 0)
    batch_event(1, 1, "Pending", "Processing", 10)
    event(1, 1, "Pending", "Estimating", 30, retry_count=2)
    event(1, 0, "", "Pending", 20)
    batch_event(2, 0, "", "Pending", 86400 * 2)
    event(2, 0, "", "Pending", 86400 * 2 + 1, bid=bid(2))
    event(2, 1, "Pending", "Completed", 86400 * 2 + 2, bid=bid(2), exact=False, actor="watch")


def test_a_jobs_record_as_csv_and_json(browser):
    two_batches()
    response = browser.get(f"/jobs/{jid(1)}/history.csv")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert f'filename="{jid(1)}-history.csv"' in response["Content-Disposition"]
    rows = read_csv(response)
    assert [(r["kind"], r["id"], r["version"], r["to_status"]) for r in rows] == [
        ("job", jid(1), "0", "Pending"),
        ("job", jid(1), "1", "Estimating"),
    ]
    assert rows[1]["from_status"] == "Pending" and rows[1]["retry_count"] == "2"
    assert rows[1]["actor"] == "worker host-a:101" and rows[1]["who"] == "worker on host-a"
    assert rows[1]["exact"] == "yes" and rows[1]["batch"] == bid(1)
    data = read_json(browser.get(f"/jobs/{jid(1)}/history.json"))
    assert data["filters"] == {"jid": jid(1)}
    assert [(r["version"], r["retry_count"], r["exact"]) for r in data["rows"]] == [
        (0, 0, True),
        (1, 2, True),
    ]


def test_a_batchs_record_holds_its_rows_then_all_its_jobs_rows(browser):
    two_batches()
    rows = read_csv(browser.get(f"/batches/{bid(1)}/history.csv"))
    assert [(r["kind"], r["id"], r["version"]) for r in rows] == [
        ("batch", bid(1), "0"),
        ("batch", bid(1), "1"),
        ("job", jid(1), "0"),
        ("job", jid(1), "1"),
    ]
    assert rows[0]["retry_count"] == ""
    data = read_json(browser.get(f"/batches/{bid(2)}/history.json"))
    assert [(r["kind"], r["version"], r["exact"]) for r in data["rows"]] == [
        ("batch", 0, True),
        ("job", 0, True),
        ("job", 1, False),
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", [("batch", 1, 0), ("batch", 1, 1), ("batch", 2, 0), ("job", 1, 0), ("job", 1, 1),
              ("job", 2, 0), ("job", 2, 1)]),
        ("collection=other", [("batch", 2, 0), ("job", 2, 0), ("job", 2, 1)]),
        (f"jid={jid(1)}", [("job", 1, 0), ("job", 1, 1)]),
        (f"bid={bid(2)}", [("batch", 2, 0), ("job", 2, 0), ("job", 2, 1)]),
        # A day's rows: since a date takes the whole day, until a date too.
        ("since=2026-03-12",
         [("batch", 2, 0), ("job", 2, 0), ("job", 2, 1)]),
        ("until=2026-03-10",
         [("batch", 1, 0), ("batch", 1, 1), ("job", 1, 0), ("job", 1, 1)]),
        (f"since={(BASE + timedelta(seconds=15)).isoformat()}"
         f"&until={(BASE + timedelta(seconds=25)).isoformat()}", [("job", 1, 0)]),
    ],
)  # fmt: skip
def test_the_whole_record_is_filtered(browser, query, expected):
    two_batches()
    for fmt in ("csv", "json"):
        response = browser.get(f"/history/export.{fmt}?{query.replace('+', '%2B')}")
        assert response.status_code == 200
        rows = read_csv(response) if fmt == "csv" else read_json(response)["rows"]
        got = [(r["kind"], int(r["id"][3:]), int(r["version"])) for r in rows]
        assert got == expected, fmt


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("since=yesterday", "since: 'yesterday' is not a date"),
        ("until=2026-02-30", "until: '2026-02-30' is not a date"),
        ("since=2026-02-02&until=2026-02-01", "since must be before until"),
        ("jid=jid1", "jid: 'jid1' is not a job id"),
        ("bid=../x", "bid: '../x' is not a batch id"),
        ("collection=Not%20One", "collection: 'Not One' is not a collection mnemonic"),
    ],
)
def test_a_bad_filter_is_refused_with_its_reason(browser, query, error):
    response = browser.get(f"/history/export.csv?{query}")
    assert response.status_code == 400
    assert error in response.content.decode()


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(browser):
    make_batch(1)
    make_job(1, "Failed")
    formulas = ['=HYPERLINK("http://x")', "+1+2", "-3", "@SUM(A1)", "\tTAB", "fine = ok"]
    for v, message in enumerate(formulas):
        event(1, v, "", "Failed", v, message=message)
    rows = read_csv(browser.get(f"/jobs/{jid(1)}/history.csv"))
    assert [r["message"] for r in rows] == [
        '\'=HYPERLINK("http://x")',
        "'+1+2",
        "'-3",
        "'@SUM(A1)",
        "'\tTAB",
        "fine = ok",
    ]
    # JSON is data, not a sheet: the messages are kept as written.
    messages = [
        r["message"] for r in read_json(browser.get(f"/jobs/{jid(1)}/history.json"))["rows"]
    ]
    assert messages == formulas


def test_exports_need_a_login(client):
    two_batches()
    for url in (f"/jobs/{jid(1)}/history.csv", f"/batches/{bid(1)}/history.json",
                "/history/export.csv"):  # fmt: skip
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_unknown_items_have_no_export(browser):
    assert browser.get(f"/jobs/{jid(9)}/history.csv").status_code == 404
    assert browser.get(f"/batches/{bid(9)}/history.json").status_code == 404


# --- a depositor reads their collections only ----------------------------------------


@pytest.fixture
def depositor(client, django_user_model):
    person = django_user_model.objects.create_user("dee")
    grant_depositor(person, ["demo"])
    client.force_login(person)
    return client


def test_a_depositor_reads_the_pages_and_records_of_their_collections_only(depositor):
    two_batches()
    assert depositor.get(f"/jobs/{jid(1)}/").status_code == 200
    assert depositor.get(f"/batches/{bid(1)}/").status_code == 200
    assert len(read_csv(depositor.get(f"/jobs/{jid(1)}/history.csv"))) == 2
    for url in (f"/jobs/{jid(2)}/", f"/batches/{bid(2)}/", f"/jobs/{jid(2)}/history.csv",
                f"/batches/{bid(2)}/history.json"):  # fmt: skip
        assert depositor.get(url).status_code == 404, url
    rows = read_csv(depositor.get("/history/export.csv"))
    assert {r["id"] for r in rows} == {bid(1), jid(1)}
    assert {r["id"] for r in read_csv(depositor.get(f"/history/export.csv?bid={bid(2)}"))} == set()
    assert depositor.get("/history/export.json?collection=other").status_code == 403


def test_a_depositor_without_a_scope_reads_no_record(client, django_user_model):
    two_batches()
    person = django_user_model.objects.create_user("nobody")
    person.groups.add(Group.objects.get_or_create(name="depositor")[0])
    client.force_login(person)
    assert read_json(client.get("/history/export.json"))["rows"] == []
    assert client.get(f"/jobs/{jid(1)}/history.csv").status_code == 404


def test_a_depositor_who_is_also_a_viewer_reads_everything(client, django_user_model):
    two_batches()
    person = django_user_model.objects.create_user("vee")
    grant_depositor(person, ["demo"])
    person.groups.add(Group.objects.get_or_create(name=VIEWER)[0])
    client.force_login(person)
    assert client.get(f"/jobs/{jid(2)}/").status_code == 200
    assert len(read_csv(client.get("/history/export.csv"))) == 7


def test_the_lists_link_the_record_narrowed_as_they_are(browser):
    two_batches()
    body = browser.get(f"/jobs/?collection=demo&batch={bid(1)}").content.decode()
    assert f'href="/history/export.csv?collection=demo&amp;bid={bid(1)}"' in body
    body = browser.get("/batches/").content.decode()
    assert 'href="/history/export.json"' in body


def test_an_export_is_sent_in_pieces_of_many_rows():
    from jobs.history_export import gathered

    assert list(gathered(["ab"] * 7, size=5)) == ["ababab", "ababab", "ab"]
    assert list(gathered([], size=5)) == []


def test_a_same_state_priority_change_is_hidden_until_asked_for(browser):
    make_batch(1)
    make_job(1, "Estimating")
    event(1, 0, "", "Pending", 0)
    event(1, 1, "Pending", "Estimating", 10)
    event(1, 2, "Estimating", "Estimating", 20, message="priority 5 -> 6")
    page = browser.get(f"/jobs/{jid(1)}/").content.decode()
    assert [r.routine for r in timeline(browser.get(f"/jobs/{jid(1)}/"))] == [False, False, True]
    assert 'class="event routine"' in page and "Show priority changes (1)" in page
