"""Admin actions in a real browser (Debian's chromium through Playwright), end to end.

A live server over a real ZooKeeper chroot and the pipeline run in this process; the
mirror follows by write-through. As in tests/browser/test_browser.py, ``MQ_SKIP_BROWSER=1`` skips.
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
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


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
    page.wait_for_url(re.compile(r"/actions/\d+/(\?next=.*)?$"))
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
    assert pipeline.store.holds.is_collection_held("demo")
    page.goto(f"{url}/collections/")
    assert "by steerer" in page.locator('tr[data-collection="demo"]').inner_text()

    bid = pipeline.submit(type="file", payload_url=f"{http_server.url}/object.txt")
    run_until(pipeline, lambda: pipeline.store.batches.get_batch(bid).status == "Held")
    assert "Held" in batch_row(page, url, bid)

    # The collections page counts the held batch; the release lists it and releases it in
    # the same step (issue 32): no "Release all held items", no dispatcher's sweep between.
    page.goto(f"{url}/collections/")
    row = page.locator('tr[data-collection="demo"]')
    assert row.locator("td.held-batches").inner_text().strip() == "1"
    # "Release all held items" says what it would release before anything is done.
    row.locator("a.action-collectionrelease_all").click()
    page.wait_for_selector("[data-confirm-open]")
    every = page.locator('.held-items[data-held="demo"]')
    assert re.sub(r"\s+", " ", every.inner_text()).startswith(
        "Held in demo, released by this action: 1 batch and 0 jobs."
    )
    assert every.locator(f'a[href="/batches/{bid}/"]').count() == 1
    page.goto(f"{url}/collections/")
    row.locator("a.action-collectionrelease").click()
    page.wait_for_selector("[data-confirm-open]")
    caught = page.locator('.held-items[data-held="demo"]')
    assert re.sub(r"\s+", " ", caught.inner_text()).startswith(
        "What the hold on demo caught, Held now: 1 batch and 0 jobs."
    )
    assert caught.locator(f'a[href="/batches/{bid}/"]').count() == 1
    assert page.is_checked("input[name=caught][value=release]")
    shoot(page, "collection-release-confirm")
    confirm(page, "migration over")
    assert not pipeline.store.holds.is_collection_held("demo")
    assert pipeline.store.batches.get_batch(bid).status == "Pending"
    assert "Pending" in batch_row(page, url, bid)
    mirror.full_reconcile(pipeline_store())
    page.goto(f"{url}/collections/")
    assert page.locator('tr[data-collection="demo"] td.held-batches').inner_text().strip() == "·"
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
    assert pipeline.store.jobs.get_job(job.jid).status != "Failed"

    (http_server.root / "late.txt").write_text("served at last\n")
    run_until(pipeline, lambda: pipeline.store.jobs.get_job(job.jid).status == "Completed")
    page.goto(f"{url}/jobs/{job.jid}/")
    assert "Completed" in page.inner_text("body")


SHOTS = "/tmp/shots-steer16"


def shoot(page, name: str) -> None:
    """The page at desktop and phone widths, for a person to look at."""
    import os

    os.makedirs(SHOTS, exist_ok=True)
    for width, height in ((1400, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=f"{SHOTS}/{name}-{width}.png", full_page=True)
    page.set_viewport_size({"width": 1400, "height": 900})


def test_select_all_resume_at_a_common_step_back_to_the_list_and_no_stale_confirmation(
    admin_page, live_server, pipeline, http_server
):
    page, url = admin_page, live_server.url
    bids = [pipeline.submit(type="file", payload_url=f"{http_server.url}/gone.txt")]
    bids.append(pipeline.submit(type="file", payload_url=f"{http_server.url}/gone.txt"))
    jobs = run_until(
        pipeline,
        lambda: (
            found
            if len(found := [j for b in bids for j in pipeline.jobs(b) if j.status == "Failed"])
            == 2
            else None
        ),
    )
    listing = f"{url}/jobs/?status=Failed"
    page.goto(listing)
    page.check("input[data-select-all]")
    assert page.locator("input[data-select]:checked").count() == 2
    shoot(page, "job-list-select-all")
    page.select_option("form.mq-action-bar select[name=action]", "job.resume")
    page.click("form.mq-action-bar button[value=selected]")
    page.wait_for_selector("[data-confirm-open]")
    assert "each job where it failed" in page.inner_text("form.confirm-form")
    shoot(page, "bulk-resume-confirm")
    used = page.get_attribute("input[name=payload]", "value")
    confirm(page, "the file will be there")
    shoot(page, "bulk-resume-result")
    assert all(pipeline.store.jobs.get_job(j.jid).status != "Failed" for j in jobs)
    page.click("a.back")
    page.wait_for_url(listing)

    page.go_back()  # the result
    page.go_back()  # the confirmation: asked again, never the used one from the cache
    page.wait_for_selector("[data-confirm-open]")
    assert page.locator(f'input[name=payload][value="{used}"]').count() == 0
    assert "applies to none" in page.inner_text("body")


def test_batch_delete_lists_its_jobs_and_a_held_collection_is_named_on_the_batch(
    admin_page, live_server, pipeline
):
    page, url, store = admin_page, live_server.url, pipeline.store
    bid = store.new_batches.create_batch({"batchID": "to-delete", "collection": "demo"}).id
    jids = [store.new_jobs.create_job(bid, {"collection": "demo"}) for _ in range(2)]
    for jid in jids:
        store.moves.transition_job(jid, "Failed", "the file was gone")
    store.batch_moves.hold_batch(bid)
    store.holds.hold_collection("demo")
    mirror.full_reconcile(store)
    page.goto(f"{url}/batches/{bid}/")
    assert "Collection demo is on hold" in page.inner_text(".waits")
    shoot(page, "batch-held-collection")
    page.click("a.action-batchdelete")
    page.wait_for_selector("[data-confirm-open]")
    along = page.inner_text(f'tr[data-along="{bid}"]')
    assert all(jid in along for jid in jids)
    assert "depositor is not notified" in page.inner_text(".mq-warning-box")
    shoot(page, "batch-delete-confirm")
