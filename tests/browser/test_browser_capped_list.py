"""A list past its count's cap, in a real browser: it says so, pages on, and stays readable.

As in tests/browser/test_browser.py, ``MQ_SKIP_BROWSER=1`` skips.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.a11y import refused
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture
from tests.pages.test_large_mirror import make_jobs
from tests.roles import viewer
from ui.listing import CappedPaginator


@pytest.fixture(params=[390, 1400], ids=["phone", "desktop"])
def page(request, browser, live_server, transactional_db):  # noqa: F811 - the imported fixture
    viewer(User.objects.create_user("librarian", password=PASSWORD))
    page = logged_in(browser, live_server.url, "librarian", width=request.param)
    yield page
    page.context.close()


def test_a_job_list_past_the_cap_says_more_than_and_pages_on(page, live_server, monkeypatch):
    monkeypatch.setattr(CappedPaginator, "cap", 3)  # the live server runs in this process
    make_jobs(5)
    page.goto(f"{live_server.url}/jobs/?per_page=2")
    count = page.locator("p.count").inner_text()
    assert "More than 3 jobs" in count and "page 1 of the first 2" in count
    assert page.locator("table tbody tr").count() == 2
    page.goto(f"{live_server.url}/jobs/?per_page=2&page=2")
    assert "page 2 of the first 2" in page.locator("p.count").inner_text()
    assert not refused(page)
