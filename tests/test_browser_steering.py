"""Admin actions in a real browser (Debian's chromium through Playwright), end to end.

A live server over a real ZooKeeper chroot and the pipeline run in this process; the
mirror follows by write-through. As in tests/test_browser.py, ``MQ_SKIP_BROWSER=1`` skips.
"""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth.models import Group, User

from batches.models import Collection
from merritt_queue.project.runtime import get_store as pipeline_store
from mirror import facade as mirror
from steering.models import ADMINISTRATOR
from tests.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture

pytest_plugins = ["tests.httpserver", "tests.pipeline"]


@pytest.fixture
def admin_page(browser, live_server, pipeline):  # noqa: F811 - the imported fixture
    user = User.objects.create_user("steerer", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=ADMINISTRATOR)[0])
    page = logged_in(browser, live_server.url, "steerer")
    yield page
    page.context.close()


def confirm(page, reason: str) -> None:
    """On a confirmation page: give the reason, confirm, land on the result page."""
    page.wait_for_selector("[data-confirm-open]")
    page.fill("textarea#reason", reason)
    page.click("form.confirm-form button[type=submit]")
    page.wait_for_url(re.compile(r"/actions/\d+/$"))
    assert "done" in page.inner_text("body")


def collection_action(page, url: str, action: str, reason: str) -> None:
    page.goto(f"{url}/collections/")
    page.click(f'tr[data-collection="demo"] a.action-{action}')
    confirm(page, reason)
    # Collection holds are not written through: the mirror's follower picks them up by a
    # reconcile (mirror.follow); run one here, as it would.
    mirror.full_reconcile(pipeline_store())


def run_until(pipeline, done, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = done()
        if value:
            return value
        if not pipeline.step():
            time.sleep(0.05)
    raise AssertionError("the pipeline did not get there in time")


def batch_row(page, url: str, bid: str) -> str:
    page.goto(f"{url}/batches/")
    return page.locator("tr", has_text=bid).first.inner_text()


def test_hold_a_collection_then_release_it_and_its_batch(
    admin_page, live_server, pipeline, http_server
):
    page, url = admin_page, live_server.url
    (http_server.root / "object.txt").write_text("held and released\n")
    Collection.objects.get_or_create(mnemonic="demo")  # the collections page lists it

    collection_action(page, url, "collectionhold", "storage migration")
    assert pipeline.store.is_collection_held("demo")
    page.goto(f"{url}/collections/")
    assert "by steerer" in page.locator('tr[data-collection="demo"]').inner_text()

    bid = pipeline.submit(type="file", payload_url=f"{http_server.url}/object.txt")
    run_until(pipeline, lambda: pipeline.store.get_batch(bid).status == "Held")
    assert "Held" in batch_row(page, url, bid)

    collection_action(page, url, "collectionrelease", "migration over")
    assert not pipeline.store.is_collection_held("demo")
    collection_action(page, url, "collectionrelease_all", "migration over")
    batch = pipeline.run(bid)
    assert batch.status == "Completed", batch.message
    assert "Completed" in batch_row(page, url, bid)


def test_a_failed_job_resumed_from_its_page_completes(
    admin_page, live_server, pipeline, http_server
):
    page, url = admin_page, live_server.url
    bid = pipeline.submit(type="file", payload_url=f"{http_server.url}/late.txt")  # 404 first
    (job,) = run_until(
        pipeline,
        lambda: [j for j in pipeline.jobs(bid) if j.status == "Failed"],
    )
    page.goto(f"{url}/jobs/{job.jid}/")
    assert "Failed" in page.inner_text("body")
    page.click("a.action-jobresume")
    confirm(page, "the file is there now")
    assert pipeline.store.get_job(job.jid).status != "Failed"

    (http_server.root / "late.txt").write_text("served at last\n")
    run_until(pipeline, lambda: pipeline.store.get_job(job.jid).status == "Completed")
    page.goto(f"{url}/jobs/{job.jid}/")
    assert "Completed" in page.inner_text("body")
