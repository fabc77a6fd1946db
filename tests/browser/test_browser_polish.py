"""Issue 32, minor "Polish", as a person sees it in a real browser (Debian's chromium
through Playwright): Cancel is a real link back, the window form shows one recurrence's
fields, the timeline names a worker's host and hides priority rows until asked.
``MQ_SKIP_BROWSER=1`` skips, as tests/browser/test_browser.py.
"""

from __future__ import annotations

from batches.models import Collection
from tests.browser.test_browser import browser  # noqa: F401 - the same fixture
from tests.browser.test_browser_steering import admin_page  # noqa: F401 - the same fixture
from tests.pages.test_history_pages import event
from tests.pages.test_pages_batches_jobs import jid, make_batch, make_job

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

CONFIRM = "/actions/collection.hold/confirm?ids=demo"


def test_cancel_on_a_confirmation_opened_in_a_new_tab_goes_to_the_list(admin_page, live_server):  # noqa: F811
    Collection.objects.create(mnemonic="demo")
    admin_page.goto(live_server.url + CONFIRM)
    admin_page.click("form.confirm-form >> text=Cancel")
    admin_page.wait_for_url(f"{live_server.url}/collections/", timeout=5000)


def test_cancel_goes_back_to_the_page_the_person_came_from(admin_page, live_server):  # noqa: F811
    Collection.objects.create(mnemonic="demo")
    came_from = f"{live_server.url}/jobs/?status=Failed"
    admin_page.goto(came_from)
    admin_page.evaluate(f"location.href = {CONFIRM!r}")
    admin_page.wait_for_selector("form.confirm-form")
    link = admin_page.get_attribute("form.confirm-form >> text=Cancel", "href")
    assert link == "/jobs/?status=Failed"


def test_the_window_form_shows_only_the_chosen_recurrences_fields(admin_page, live_server):  # noqa: F811
    admin_page.goto(f"{live_server.url}/windows/schedule")
    assert admin_page.is_visible("#id_start") and not admin_page.is_visible("#id_weekday")
    admin_page.select_option("#id_recurrence", "weekly")
    assert admin_page.is_visible("#id_weekday") and not admin_page.is_visible("#id_start")
    assert admin_page.is_disabled("#id_start")  # hidden, and not sent


def test_the_timeline_names_the_workers_host_and_hides_priority_rows_until_asked(
    admin_page,  # noqa: F811
    live_server,
):
    make_batch(1)
    make_job(1, "Estimating")
    event(1, 0, "", "Pending", 0)
    event(1, 1, "Pending", "Estimating", 10)
    event(1, 2, "Estimating", "Estimating", 20, message="priority 5 -> 6")
    admin_page.goto(f"{live_server.url}/jobs/{jid(1)}/")
    timeline = admin_page.locator("table.timeline")
    assert "worker on host-a" in timeline.inner_text()
    assert "host-a:101" not in timeline.inner_text()
    assert not admin_page.is_visible("text=priority 5 -> 6")
    admin_page.click("text=Show priority changes (1)")
    assert admin_page.is_visible("text=priority 5 -> 6")


def test_no_page_cancels_with_history_back():
    """Every Cancel is a link that can be opened, kept and read aloud."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = [
        str(p.relative_to(root))
        for p in root.glob("*/templates/**/*.html")
        if "history.back" in p.read_text()
    ]
    assert found == []
