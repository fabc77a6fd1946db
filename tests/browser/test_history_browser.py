"""A resumed job's record in a real browser (Debian's chromium through Playwright): its
failure, the admin's resume inline with who and why, and the steps after it, in version
order, on the job's page and its batch's; wide and on a phone, where nothing may make the
page scroll sideways. The pipeline, ZooKeeper and the mirror's write-through are the real
ones (tests/browser/test_browser_steering.py). ``MQ_SKIP_BROWSER=1`` skips.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User

from steering.models import ADMINISTRATOR
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture
from tests.browser.test_browser_objects import fits
from tests.browser.test_browser_steering import confirm, run_until

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

REASON = "the file is there now"


@pytest.fixture
def resumed(browser, live_server, pipeline, http_server, settings):  # noqa: F811 - the imported fixture
    """A job that failed (its file was missing), resumed from its page by "steerer", then
    completed; returns ``(jid, bid)``."""
    # The job is resumed while its batch is still Processing, as other jobs keep a real
    # batch: the worker's hand-over would report this one-job batch in the same burst.
    settings.MQ_HANDOVER = False
    user = User.objects.create_user("steerer", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=ADMINISTRATOR)[0])
    page = logged_in(browser, live_server.url, "steerer")
    bid = pipeline.submit(type="file", payload_url=f"{http_server.url}/late.txt")  # 404 first
    (job,) = run_until(pipeline, lambda: [j for j in pipeline.jobs(bid) if j.status == "Failed"])
    page.goto(f"{live_server.url}/jobs/{job.jid}/")
    page.click("a.action-jobresume")
    confirm(page, REASON)
    (http_server.root / "late.txt").write_text("served at last\n")
    run_until(pipeline, lambda: pipeline.store.jobs.get_job(job.jid).status == "Completed")
    pipeline.run(bid)
    page.context.close()
    return job.jid, bid


@pytest.fixture(params=[1400, 390], ids=["desktop", "phone"])
def width(request):
    return request.param


OVERFLOWING = """() => [...document.querySelectorAll("body *")]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .filter(e => !e.closest(".table-container"))
  .map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "")).slice(0, 10)"""


def overflowing(page) -> list[str]:
    """The elements past the page's right edge, outside a box that scrolls on its own."""
    return page.evaluate(OVERFLOWING)


ROW = "table.timeline tr.event"


def versions(page) -> list[int]:
    rows = page.locator(ROW)
    return [int(rows.nth(i).get_attribute("data-version")) for i in range(rows.count())]


def test_a_resumed_jobs_timeline(
    browser,  # noqa: F811 - the imported fixture
    live_server,
    pipeline,
    resumed,
    width,
    tmp_path,
):
    jid, _ = resumed
    page = logged_in(browser, live_server.url, "steerer", width=width)
    try:
        page.goto(f"{live_server.url}/jobs/{jid}/")
        shown = versions(page)
        # Every version ZooKeeper made, once each, in order.
        assert shown == list(range(pipeline.store.jobs.get_job(jid).status_version + 1))
        changes = [
            re.sub(r"\s+", " ", page.locator(f"{ROW}[data-version='{v}'] td.c-change").inner_text())
            for v in shown
        ]
        failed = next(i for i, c in enumerate(changes) if "→ Failed" in c)
        assert "Downloading → Failed" in changes[failed]
        message = page.locator(f"{ROW}[data-version='{failed}'] td.c-message").inner_text()
        assert "404" in message
        # The resume: the row after the failure, with the action inline, who and why.
        resume = page.locator(f"{ROW}[data-version='{failed + 1}']")
        assert changes[failed + 1].startswith("Failed → ")
        assert resume.locator("td.c-who").inner_text().strip().endswith("steerer")
        assert resume.locator("td.c-retries").inner_text().strip().endswith("1")
        note = page.locator("table.timeline tr.admin-note")
        assert note.count() == 1
        text = note.inner_text()
        assert "Resume (job)" in text and "steerer" in text and REASON in text
        assert re.search(r"/actions/\d+/$", note.locator("a").get_attribute("href"))
        assert resume.evaluate("row => row.nextElementSibling.classList.contains('admin-note')")
        # The steps after it, up to Completed.
        after = changes[failed + 1 :]
        assert "Storing → Recording" in " ".join(after)
        assert "Notify → Completed" in after[-1]
        assert fits(page), overflowing(page)
        page.screenshot(path=str(tmp_path / f"job-{width}.png"), full_page=True)
        assert (tmp_path / f"job-{width}.png").stat().st_size > 10_000
    finally:
        page.context.close()


def test_the_batch_of_a_resumed_job_has_its_own_timeline(
    browser,  # noqa: F811 - the imported fixture
    live_server,
    pipeline,
    resumed,
    width,
    tmp_path,
):
    jid, bid = resumed
    page = logged_in(browser, live_server.url, "steerer", width=width)
    try:
        page.goto(f"{live_server.url}/jobs/{jid}/")
        page.click(f"a[href='/batches/{bid}/']")
        page.wait_for_url(f"**/batches/{bid}/")
        shown = versions(page)
        assert shown == list(range(pipeline.store.batches.get_batch(bid).status_version + 1))
        timeline = re.sub(r"\s+", " ", page.locator("section#timeline").inner_text())
        assert "Processing → Reporting" in timeline and "Reporting → Completed" in timeline
        assert page.locator(f"a[href='/jobs/{jid}/']").count() >= 1
        assert page.locator(f"a[href='/batches/{bid}/history.csv']").count() == 1
        assert fits(page), overflowing(page)
        page.screenshot(path=str(tmp_path / f"batch-{width}.png"), full_page=True)
        assert (tmp_path / f"batch-{width}.png").stat().st_size > 10_000
    finally:
        page.context.close()
