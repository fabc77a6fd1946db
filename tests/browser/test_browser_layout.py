"""Lists fit the window at a desktop's 1400 px, and what people act on is read on a phone's
390 px without sideways scrolling (issue 32, "Wide tables" and "Phone (390 px)").

The data is like the demo's after a while: several batches of every submission type, with
long batchIDs, titles and messages, and failed jobs whose messages are long URLs. As in
tests/browser/test_browser.py, ``MQ_SKIP_BROWSER=1`` skips; screenshots go to ``$MQ_SHOTS_DIR``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from batches.models import Batch, Collection
from jobs.models import Job
from merritt_queue.core.planning import SUBMISSION_TYPES
from steering.models import ADMINISTRATOR, AdminAction
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401
from tests.browser.test_browser_phone import shoot
from ui.signatures import cause_of

DESKTOP, PHONE = 1400, 390
LONG_URL = (
    "https://merritt-content.example.org/ucb/deposits/2026/november/"
    "a-folder-that-moved-last-week/subfolder-with-a-long-name/image-{n:04d}.tif"
)
MESSAGES = (
    "404 Not Found: " + LONG_URL,
    "Digest mismatch for producer/image-{n:04d}.tif: manifest says sha256 "
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, computed "
    "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbac9f9d0bf1d86",
    "Storage refused the version: HTTP 503 Service Unavailable from "
    "https://storage.example.org/add/9501/ark%3A%2F13030%2Fm5{n:04d}zz (retry later)",
)


def job_row(n: int, bid: str, status: str, message: str = "") -> Job:
    return Job.objects.create(
        jid=f"jid{n:010d}",
        batch_id=bid,
        status=status,
        collection="ucb_lib_digital_special_collections",
        title=f"Photographs of the Berkeley campus, box {n}, folder {n % 7}: gelatin prints",
        local_id=f"ucb-lib-bancroft-BANC-PIC-1905.{n:05d}-ffALB",
        ark=f"ark:/13030/m5{n:08d}",
        last_successful_status="Provisioning" if status == "Failed" else "",
        space_needed=n * 123_456_789,
        retry_count=n % 3,
        message=message,
        signature=cause_of(message) if message else "",
        last_modified=timezone.now() - timedelta(minutes=n),
        read_at=timezone.now(),
    )


def fill() -> list[str]:
    """Three batches of every type, each with completed and failed jobs; the bids made."""
    bids, n = [], 0
    for t, kind in enumerate(SUBMISSION_TYPES):
        for copy in range(3):
            bid = f"bid{t * 3 + copy + 1:010d}"
            bids.append(bid)
            failed = copy != 0
            Batch.objects.create(
                bid=bid,
                uuid=f"ucb-bancroft-photographs-2026-11-{t:02d}-{copy}-{kind}-resubmission",
                collection="ucb_lib_digital_special_collections",
                submitter="bancroft-librarian@berkeley.example.edu",
                type=kind,
                title="Bancroft Library photographs, second transfer, boxes 1-40",
                submitted=timezone.now() - timedelta(hours=t * 3 + copy),
                status="Failed" if failed else "Completed",
                message=MESSAGES[copy].format(n=t) if failed else "",
                job_counts={"Completed": 3, "Failed": 2} if failed else {"Completed": 3},
                job_total=5 if failed else 3,
                read_at=timezone.now(),
            )
            for _ in range(2 if failed else 1):
                n += 1
                message = MESSAGES[n % 3].format(n=n) if failed else ""
                job_row(n, bid, "Failed" if failed else "Completed", message)
    return bids


@pytest.fixture
def admin(transactional_db):
    user = User.objects.create_user("steerer", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get_or_create(name=ADMINISTRATOR)[0])
    Collection.objects.get_or_create(mnemonic="ucb_lib_digital_special_collections")
    fill()
    AdminAction.objects.create(
        action="job.edit_resume",
        username=user.username,
        reason="The depositor moved the folder " + LONG_URL.format(n=1) + " to the new server",
        scope="job",
        selection=",".join(f"jid{n:010d}" for n in range(1, 40)),
        total=39,
        done=39,
        token="layout",
    )
    return user


def fits(page) -> dict:
    """How wide the document and the list's table are, against the window."""
    return page.evaluate(
        """() => {
        const t = document.querySelector('main table');
        return {doc: document.documentElement.scrollWidth, win: window.innerWidth,
                right: t ? t.getBoundingClientRect().right : 0};
    }"""
    )


LISTS = ("/batches/", "/jobs/", "/objects/", "/collections/", "/actions/", "/locks/")
# The lists whose columns CSS drops at narrower widths (ui.tables.PageTable).
PAGE_TABLES = ("/batches/", "/jobs/", "/objects/")


@pytest.mark.parametrize("width", [DESKTOP, 1024, 800])
def test_every_list_fits_a_desktop_window(browser, live_server, admin, width):  # noqa: F811
    """At 1400 px every list with all its columns; narrower, the lists that drop those read
    least (the collections' matrix of counts and the audit list scroll there)."""
    page = logged_in(browser, live_server.url, "steerer", width=width)
    try:
        wide = {}
        for path in LISTS if width == DESKTOP else PAGE_TABLES:
            page.goto(f"{live_server.url}{path}")
            shoot(page, f"list{path.replace('/', '-')}{width}")
            found = fits(page)
            if found["doc"] > found["win"] or found["right"] > found["win"]:
                wide[path] = found
        assert not wide, f"wider than {width} px: {wide}"
    finally:
        page.context.close()


def test_the_batch_list_shows_types_in_words(browser, live_server, admin):  # noqa: F811
    page = logged_in(browser, live_server.url, "steerer", width=DESKTOP)
    try:
        page.goto(f"{live_server.url}/batches/")
        cell = page.locator("td.c-type [title='single-file-batch-manifest']").first
        assert cell.inner_text() == "A batch of files"
        assert cell.bounding_box()["height"] < 45, "the type wraps over more than two lines"
        jobs = page.locator("td.c-job_counts").first
        assert jobs.is_visible() and jobs.bounding_box()["x"] + 10 < DESKTOP
    finally:
        page.context.close()


def overflowing(page, selector: str) -> list[str]:
    """The texts of the elements matching ``selector`` cut off inside their own box."""
    return page.evaluate(
        """(sel) => [...document.querySelectorAll(sel)]
            .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.trim())""",
        selector,
    )


def test_a_phone_reads_the_dashboard_failures_first(browser, live_server, admin):  # noqa: F811
    page = logged_in(browser, live_server.url, "steerer", width=PHONE)
    try:
        page.goto(f"{live_server.url}/")
        shoot(page, f"dashboard-{PHONE}")
        failed = page.locator('#act-on a[data-scope="job"][data-status="Failed"]')
        assert failed.get_attribute("data-count") == "24"
        box = failed.bounding_box()
        assert box["y"] + box["height"] <= 900, "the Failed count is below the first screen"
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE, "it is past the edge"
        causes = page.locator("table.causes")
        assert causes.locator("tbody tr").count() == 3
        cut = overflowing(page, "table.causes, table.causes td, table.causes td *")
        assert not cut, f"cut off: {cut}"
        for cell in causes.locator("td.num").all():
            assert cell.bounding_box()["x"] + cell.bounding_box()["width"] <= PHONE
    finally:
        page.context.close()


def within(page, selector: str, width: int) -> list[dict]:
    """The boxes of the elements matching ``selector`` that are not wholly in the window."""
    return page.evaluate(
        """([sel, width]) => [...document.querySelectorAll(sel)]
            .map(e => e.getBoundingClientRect())
            .filter(r => r.left < 0 || r.right > width + 1)
            .map(r => ({left: r.left, right: r.right}))""",
        [selector, width],
    )


def test_a_phone_reads_a_jobs_message(browser, live_server, admin):  # noqa: F811
    page = logged_in(browser, live_server.url, "steerer", width=PHONE)
    try:
        page.goto(f"{live_server.url}/jobs/jid0000000002/")
        shoot(page, f"job-{PHONE}")
        assert "Storage refused the version" in page.inner_text("main")
        assert not overflowing(page, "main, main dl, main dd, main pre")
        page.goto(f"{live_server.url}/jobs/?status=Failed")
        shoot(page, f"jobs-failed-{PHONE}")
        messages = "main td.c-message"
        assert page.locator(messages).count() == 24
        assert not within(page, messages, PHONE), "a message is past the phone's edge"
        cut = overflowing(page, f"main .table-container, main table, {messages}, {messages} *")
        assert not cut, f"cut off: {cut}"
    finally:
        page.context.close()


def test_a_phone_sees_what_a_confirmation_applies_to(browser, live_server, admin):  # noqa: F811
    page = logged_in(browser, live_server.url, "steerer", width=PHONE)
    try:
        ids = "&".join(f"ids=jid{n:010d}" for n in (1, 2, 3))
        page.goto(f"{live_server.url}/actions/job.resume/confirm?{ids}")
        shoot(page, f"confirm-{PHONE}")
        applies = page.locator("table.confirm-items td.c-applies")
        assert applies.count() == 3
        for cell in applies.all():
            box = cell.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE, box
        cut = overflowing(page, "main, main .table-container, main table")
        assert not cut, f"cut off: {cut}"
    finally:
        page.context.close()
