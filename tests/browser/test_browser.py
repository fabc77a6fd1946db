"""The UI in a real browser: Debian's headless chromium driven by Playwright, against a live server.

The browser is ``/usr/bin/chromium`` from Debian's ``chromium`` package (``make test``
installs it through ``scripts/services.sh ensure-chromium``), never a Playwright download.
Without it these tests fail with that message; ``MQ_SKIP_BROWSER=1`` skips them.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.utils import timezone

from batches.models import Batch
from jobs.models import Job, JobEvent
from tests.roles import viewer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser():
    if os.environ.get("MQ_SKIP_BROWSER") == "1":
        pytest.skip("MQ_SKIP_BROWSER=1: browser tests skipped")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need Debian's chromium "
            "(scripts/services.sh ensure-chromium, or apt-get install -y chromium); "
            "set MQ_SKIP_BROWSER=1 to skip them"
        )
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls
    # are still synchronous and safe.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


PASSWORD = "a long password"


def logged_in(browser, base_url: str, username: str, width: int = 1366):
    """A page of a new browser context, logged in as ``username`` (password ``PASSWORD``)
    through the login form an anonymous visit is sent to; close its ``context`` after."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{base_url}/")
    assert "/accounts/login/" in page.url  # anonymous: the login page first
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")
    return page


@pytest.fixture
def page(browser, live_server, transactional_db):
    viewer(User.objects.create_user("librarian", password=PASSWORD))
    page = logged_in(browser, live_server.url, "librarian")
    yield page
    page.context.close()


def job(n: int, status: str, collection: str, **kw) -> Job:
    return Job.objects.create(
        jid=f"jid{n:010d}",
        batch_id="bid0000000001",
        status=status,
        collection=collection,
        title=f"Object {n}",
        last_modified=timezone.now() - timedelta(minutes=n),
        read_at=timezone.now(),
        **kw,
    )


def fill_mirror() -> None:
    # Written behind the app's back: the dashboard keeps its settled counts for a while.
    cache.clear()
    Batch.objects.create(
        bid="bid0000000001", status="Processing", collection="ucb", read_at=timezone.now()
    )
    for n in (1, 2):
        job(n, "Failed", "ucb", last_successful_status="Provisioning", message="download failed")
    job(3, "Failed", "ucla", last_successful_status="Provisioning", message="download failed")
    job(4, "Completed", "ucla")
    job(5, "Pending", "ucb")
    start = timezone.now() - timedelta(hours=1)
    path = ["Pending", "Estimating", "Provisioning", "Downloading", "Failed"]
    for version, (old, new) in enumerate(zip(["", *path], path, strict=False)):
        JobEvent.objects.create(
            jid="jid0000000001",
            bid="bid0000000001",
            from_status=old,
            to_status=new,
            at=start + timedelta(minutes=version),
            actor="worker",
            status_version=version,
            message="download failed" if new == "Failed" else "",
        )
    JobEvent.objects.create(jid="jid0000000004", to_status="Completed", at=timezone.now())


def count_of(page, status: str) -> str:
    return page.get_attribute(f'#machine-job a.node[data-status="{status}"]', "data-count")


def test_dashboard_to_a_state_a_filter_and_a_job_timeline(page, live_server, tmp_path):
    fill_mirror()
    page.reload()

    assert page.locator("#machine-job a.node").count() == 12
    assert page.locator("#machine-batch a.node").count() == 8
    assert count_of(page, "Failed") == "3" and count_of(page, "Completed") == "1"
    # A bar for each hour of the last day, and for each day of the last week.
    assert page.locator("#throughput-day rect.bar").count() == 24
    assert page.locator("#throughput-week rect.bar").count() == 7
    shot = tmp_path / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000

    # A state in the diagram lists its jobs.
    page.click('#machine-job a.node[data-status="Failed"]')
    page.wait_for_url("**/jobs/?status=Failed")
    body = page.inner_text("main")
    assert all(f"jid000000000{n}" in body for n in (1, 2, 3))
    assert "jid0000000004" not in body and "jid0000000005" not in body

    # Narrow it with the list's own filter form.
    page.fill("#id_collection", "ucb")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**collection=ucb**")
    body = page.inner_text("main")
    assert "jid0000000001" in body and "jid0000000002" in body
    assert "jid0000000003" not in body

    # A job's page shows its timeline.
    page.click("a[href='/jobs/jid0000000001/']")
    page.wait_for_url("**/jobs/jid0000000001/")
    timeline = page.locator("table.timeline")
    assert timeline.count() == 1
    rows = timeline.inner_text()
    assert "Downloading" in rows and "Failed" in rows and "download failed" in rows
    shot = tmp_path / "job.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_collections_locks_and_consistency_pages_render(page, live_server, tmp_path):
    fill_mirror()
    for name in ("collections", "locks", "consistency"):
        page.goto(f"{live_server.url}/{name}/")
        assert page.locator("[data-refresh]").count() == 1
        shot = tmp_path / f"{name}.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 5_000
    page.goto(f"{live_server.url}/collections/")
    page.click("tr[data-collection='ucb'] a.status-failed")
    page.wait_for_url("**/jobs/?collection=ucb&status=Failed")
    assert "jid0000000003" not in page.inner_text("main")


def test_auto_refresh_replaces_the_numbers_and_waits_while_someone_chooses(
    page, live_server, transactional_db
):
    page.add_init_script("window.MQ_REFRESH_SECONDS = 1")
    page.goto(f"{live_server.url}/")
    toggle = page.get_by_label("auto-refresh")
    assert toggle.is_checked()  # on by default
    assert count_of(page, "Pending") == "0"

    job(1, "Pending", "ucb")
    page.wait_for_selector('#machine-job a.node[data-status="Pending"][data-count="1"]')

    def stays(expected: str) -> None:
        page.wait_for_timeout(2500)  # more than two refresh periods
        assert count_of(page, "Pending") == expected

    # While a selection or a confirmation is open, nothing moves under the person.
    blockers = [
        "const b = document.createElement('input'); b.type = 'checkbox';"
        "b.dataset.select = ''; b.checked = true; b.id = 'blocker'; document.body.append(b)",
        "const b = document.createElement('div'); b.dataset.confirmOpen = '';"
        "b.id = 'blocker'; document.body.append(b)",
        "const b = document.createElement('dialog'); b.id = 'blocker';"
        "document.body.append(b); b.show()",
    ]
    for n, blocker in enumerate(blockers, start=2):
        page.evaluate(blocker)
        job(n, "Pending", "ucb")
        stays(str(n - 1))
        page.evaluate("document.getElementById('blocker').remove()")
        page.wait_for_selector(f'#machine-job a.node[data-status="Pending"][data-count="{n}"]')

    # A hidden tab does not poll.
    page.evaluate("Object.defineProperty(document, 'hidden', {value: true, configurable: true})")
    job(5, "Pending", "ucb")
    stays("4")
    page.evaluate("delete document.hidden")
    page.wait_for_selector('#machine-job a.node[data-status="Pending"][data-count="5"]')

    # Turned off, it stays off, also after a reload (localStorage).
    toggle.uncheck()
    job(6, "Pending", "ucb")
    stays("5")
    page.reload()
    assert not page.get_by_label("auto-refresh").is_checked()
    assert count_of(page, "Pending") == "6"
    job(7, "Pending", "ucb")
    stays("6")
    page.get_by_label("auto-refresh").check()
    page.wait_for_selector('#machine-job a.node[data-status="Pending"][data-count="7"]')
