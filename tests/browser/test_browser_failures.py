"""Why a job failed, in a real browser: the message is in view beside the id at 1400 px and
on a phone, and a long one opens to its whole text. Screenshots go to ``MQ_SHOTS`` if set."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from batches.models import Batch
from jobs.models import Job
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture
from ui.signatures import cause_of

LONG = (
    "digest mismatch: md5 expected 3f2a9b41c0d8e7f6a1b2c3d4e5f60718 got "
    "0123456789abcdef0123456789abcdef for producer/images/page-0042.tif"
)


def shot(page, name: str) -> None:
    folder = os.environ.get("MQ_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=f"{folder}/{name}.png", full_page=True)


@pytest.fixture
def mirror(transactional_db):
    now = timezone.now()
    Batch.objects.create(
        bid="bid0000000001",
        uuid="b-2026-11-ucb",
        status="Failed",
        collection="ucb",
        title="Manifest of November",
        message="manifest line 3: 5 fields, expected 12",
        read_at=now,
    )
    for n in range(1, 6):
        Job.objects.create(
            jid=f"jid{n:010d}",
            batch_id="bid0000000001",
            status="Failed" if n % 2 else "Completed",
            collection="ucb",
            local_id=f"ucb-local-identifier-{n}",
            ark=f"ark:/13030/m5{n:08d}",
            title=f"A rather long title of an object, number {n}",
            message=LONG.replace("0042", f"00{n}") if n % 2 else "",
            signature=cause_of(LONG.replace("0042", f"00{n}") if n % 2 else ""),
            last_modified=now - timedelta(minutes=n),
            read_at=now,
        )


@pytest.fixture
def user(transactional_db):
    User.objects.create_superuser("boss", password=PASSWORD)
    return "boss"


PHONE = 390


@pytest.mark.parametrize("width", [1400, PHONE])
def test_the_message_is_in_view_beside_the_id(browser, live_server, mirror, user, width):  # noqa: F811
    page = logged_in(browser, live_server.url, user, width=width)
    try:
        page.goto(f"{live_server.url}/jobs/")
        row = page.locator("table.mq-table tbody tr").first
        jid, status, message = (row.locator(f"td.c-{c}") for c in ("jid", "status", "message"))
        boxes = [c.bounding_box() for c in (jid, status, message)]
        assert boxes[0]["x"] < boxes[1]["x"]
        if width > PHONE:
            assert boxes[1]["x"] < boxes[2]["x"]
        else:  # a card: the message on the line under the id and status, the card's width
            assert boxes[2]["y"] >= boxes[0]["y"] + boxes[0]["height"] - 1
            assert boxes[2]["x"] + boxes[2]["width"] <= width
        assert boxes[2]["x"] < width  # the message starts on screen, without scrolling
        shot(page, f"jobs-{width}")
        message.locator("summary").click()
        full = message.locator("details[open] .full")
        assert full.inner_text() == LONG.replace("0042", "005")
        assert not message.locator(".short").is_visible()
        shot(page, f"jobs-{width}-opened")
        page.goto(f"{live_server.url}/batches/")
        cell = page.locator("table.mq-table tbody tr").first.locator("td.c-message")
        assert "manifest line 3" in cell.inner_text()
        assert cell.bounding_box()["x"] < width
        shot(page, f"batches-{width}")
        page.goto(f"{live_server.url}/")
        causes = page.locator("table.causes a.msg")
        assert causes.first.inner_text().startswith("digest mismatch: md5 expected <hex>")
        shot(page, f"dashboard-{width}")
        page.locator("table.causes a.resume-all").first.click()
        page.wait_for_url("**/actions/job.resume/confirm*")
        assert "jid0000000005" in page.content() and "jid0000000002" not in page.content()
        shot(page, f"resume-confirm-{width}")
    finally:
        page.context.close()
