"""The queue at a moment in a real browser (Debian's chromium through Playwright): a moment
picked with the page's own picker, a count followed to its items, two moments compared, a
refusal, each page without a critical or serious axe-core finding, on a desktop and a phone.
``MQ_SKIP_BROWSER=1`` skips."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.a11y import refused
from tests.browser.test_browser import browser, page  # noqa: F401 - the same fixtures
from tests.browser.test_history_browser import overflowing
from tests.mirror.test_preservation_moment import at, audit, make_record


@pytest.fixture
def record(transactional_db):
    make_record()


def local(seconds: int) -> str:
    return timezone.localtime(at(seconds)).strftime("%Y-%m-%dT%H:%M:%S")


@pytest.mark.parametrize("width", [1366, 390], ids=["desktop", "phone"])
def test_a_moment_picked_then_a_count_then_a_diff(page, live_server, record, width):  # noqa: F811
    audit("collection.hold", "collection", "demo", 100)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/")
    page.click("a[href='/moment/']")
    assert "Times are in" in page.inner_text("#moment-zone")
    assert refused(page) == []
    page.fill("#m-at", local(250))
    page.click("button:has-text('Show')")
    page.wait_for_selector("#counts-h")
    held = page.locator("table:has(caption:text('Jobs by state')) tr:has(th:text('Held')) a")
    assert held.inner_text() == "1"
    assert "demo" in page.inner_text("table:has(caption:text('Collections on hold'))")
    assert refused(page) == [] and overflowing(page) == []
    held.click()
    page.wait_for_selector("#items-h")
    assert page.locator("a[href='/jobs/jid0000000002/']").count() == 1
    assert refused(page) == []
    page.goto(f"{live_server.url}/moment/")
    page.fill("#m-at", local(100))
    page.fill("#m-diff", local(330))
    page.click("button:has-text('Show')")
    page.wait_for_selector("#moved-h")
    assert "Pending → Failed → Deleted" in page.inner_text("#moved-h ~ div table")
    assert refused(page) == [] and overflowing(page) == []
    page.goto(f"{live_server.url}/moment/?at=2999-01-01T00:00")
    assert "is in the future" in page.inner_text("[role=alert]")
    assert refused(page) == []
