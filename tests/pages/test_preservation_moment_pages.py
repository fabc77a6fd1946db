"""The queue at a moment, on its page (/moment/): the counts at a time, each a link to its
items; a diff between two moments; the refusals in words; a depositor's scope; the links
that lead to it; a fixed number of queries whatever the size of the record."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.moment import link_time
from door.rights import grant_depositor
from tests.mirror.test_preservation_moment import at, audit, job, make_record
from tests.roles import viewer

pytestmark = pytest.mark.django_db


@pytest.fixture
def record(db):
    make_record()


@pytest.fixture
def browser(client, django_user_model):
    client.force_login(viewer(django_user_model.objects.create_user("librarian")))
    return client


def local(seconds: int) -> str:
    """The picker's value: the site's zone, no offset."""
    return timezone.localtime(at(seconds)).strftime("%Y-%m-%dT%H:%M:%S")


def test_the_page_shows_counts_at_a_moment_each_linking_to_its_items(browser, record):
    audit("collection.hold", "collection", "demo", 100)
    page = browser.get("/moment/", {"at": local(250)})
    assert page.status_code == 200
    html = page.content.decode()
    assert page.context["jobs"].by_state["Held"] == 1
    query = urlencode({"at": link_time(at(250)), "kind": "job", "state": "Held"})
    assert "/moment/?" + query.replace("&", "&amp;") in html
    assert "demo" in [h.collection for h in page.context["holds"]]
    assert "Times are in" in html and timezone.get_current_timezone_name() in html
    assert "not recorded over time" not in html


def test_the_page_lists_the_locks_held_then_and_those_taken_or_released(browser, record):
    from mirror.locks import refresh_locks
    from tests.mirror.test_preservation_moment_locks import HOLD, OTHER, node

    refresh_locks({HOLD: node(10)}, at(20))
    refresh_locks({OTHER: node(50)}, at(60))
    html = browser.get("/moment/", {"at": local(15)}).content.decode()
    assert HOLD in html and OTHER not in html
    assert "released between" in html or "Released between" in html
    html = browser.get("/moment/", {"at": local(30), "diff": local(90)}).content.decode()
    assert "Locks taken or released" in html and OTHER in html and HOLD in html


def test_a_count_opens_the_list_of_its_items(browser, record):
    page = browser.get("/moment/", {"at": local(250), "kind": "job", "state": "Pending"})
    html = page.content.decode()
    assert 'href="/jobs/jid0000000005/"' in html
    assert "jid0000000001" not in html  # Estimating then


def test_the_diff_lists_counts_at_both_moments_and_what_moved(browser, record):
    page = browser.get("/moment/", {"at": local(100), "diff": local(330)})
    html = page.content.decode()
    assert page.status_code == 200
    assert "Pending → Failed → Deleted" in html
    assert page.context["diff"].changed.total == 4


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"at": "2999-01-01T00:00"}, "is in the future"),
        ({"at": "2001-01-01T00:00"}, "before the recorded history begins"),
        ({"at": "soon"}, "is not a time"),
    ],
)
def test_refusals_are_said_plainly(browser, record, params, words):
    page = browser.get("/moment/", params)
    assert page.status_code == 400
    assert words in page.content.decode()


def test_a_depositor_sees_only_their_collections(client, django_user_model, record):
    dana = django_user_model.objects.create_user("dana")
    grant_depositor(dana, ["demo"])
    client.force_login(dana)
    audit("collection.hold", "collection", "other", 100)
    page = client.get("/moment/", {"at": local(250)})
    assert "Held" not in page.context["jobs"].by_state  # jid2 is of "other"
    assert page.context["holds"] == []
    items = client.get("/moment/", {"at": local(250), "kind": "job", "state": "Held"})
    assert "jid0000000002" not in items.content.decode()


def test_the_dashboard_and_the_locks_page_lead_to_it(browser, record):
    for url in ("/", "/locks/", "/actions/"):
        assert 'href="/moment/' in browser.get(url).content.decode(), url


def test_queries_do_not_grow_with_the_record(browser, record):
    def count() -> int:
        from django.core.cache import cache

        cache.clear()
        with CaptureQueriesContext(connection) as ctx:
            browser.get("/moment/", {"at": local(250), "diff": local(330)})
        return len(ctx.captured_queries)

    before = count()
    for n in range(10, 30):
        job(n, [(0, "", "Pending", 240), (1, "Pending", "Held", 260 + n)])
    assert count() == before


def test_the_now_of_the_page_is_the_live_mirror(browser, record):
    now = timezone.localtime(timezone.now() - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S")
    page = browser.get("/moment/", {"at": now})
    assert page.context["jobs"].by_state == {"Completed": 1, "Held": 1, "Pending": 1, "Storing": 1}


def test_without_a_moment_the_page_offers_the_picker_and_says_where_the_record_begins(
    browser, record
):
    html = browser.get("/moment/").content.decode()
    assert 'type="datetime-local"' in html and 'for="m-at"' in html
    assert "The record begins" in html


def test_each_row_of_a_jobs_timeline_opens_the_queue_at_its_moment(browser, record):
    html = browser.get("/jobs/jid0000000001/").content.decode()
    assert 'href="/moment/?at=2026-03-10T12%3A01%3A40%2B00%3A00"' in html
    page = browser.get("/moment/", {"at": "2026-03-10T12:01:40+00:00"})
    assert page.status_code == 200


def test_a_depositor_is_not_shown_other_collections_removed_items(
    client, django_user_model, record
):
    from steering.models import AdminAction, AdminActionItem

    done = AdminAction.objects.create(
        username="admin", action="cleanup", scope="queue", reason="private words", token="c9"
    )
    AdminAction.objects.filter(pk=done.pk).update(started=at(450))
    AdminActionItem.objects.create(admin_action=done, item_id="jid0000000077", result="done")
    dana = django_user_model.objects.create_user("dana")
    grant_depositor(dana, ["demo"])
    client.force_login(dana)
    html = client.get("/moment/", {"at": local(250)}).content.decode()
    assert "jid0000000077" not in html and "private words" not in html
    assert "removed" in html


def test_links_in_the_repeated_hour_keep_their_offset(browser, record):
    """When clocks go back, 01:30 happens twice: a link without its offset would open the
    first of them, an hour off from the second."""
    from datetime import UTC, datetime

    from mirror.moment import when

    with timezone.override("America/Los_Angeles"):
        first = datetime(2026, 11, 1, 8, 30, tzinfo=UTC)  # 01:30 PDT
        second = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)  # 01:30 PST
        assert when.parse(link_time(first)) == first
        assert when.parse(link_time(second)) == second
        # a "+" left unencoded in a URL arrives as a space
        assert when.parse(link_time(second).replace("+", " ")) == second


def test_the_page_says_whether_each_access_queue_was_paused(browser, record):
    audit("access.pause", "access-queue", "large", 100)
    html = browser.get("/moment/", {"at": local(250)}).content.decode()
    assert "Small access queue: running" in html
    assert "Large access queue: <strong>paused</strong>" in html
    diff = browser.get("/moment/", {"at": local(50), "diff": local(250)}).content.decode()
    assert "The large access queue's pause began" in diff
