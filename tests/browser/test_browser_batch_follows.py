"""A fixed batch in a real browser (issue 32, finding 1): three jobs failed, were resumed from
the job list and completed; the batch then says Completed everywhere a person looks (its page,
its report, its timeline with the queue's reason, the batch list and the dashboard's counts),
with no "Report again" from anyone. The pipeline, ZooKeeper and the mirror's write-through are
the real ones (tests/browser/test_browser_steering.py)."""

from __future__ import annotations

import re

from tests.browser.test_browser import browser  # noqa: F401 - the same fixture
from tests.browser.test_browser_steering import admin_page, batch_row, confirm, run_until, shoot  # noqa: F401

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

NAMES = ("late1.txt", "late2.txt", "late3.txt")


def three_file_manifest(http_server) -> str:
    lines = "".join(f"{http_server.url}/{n} | | | | | {n}\n" for n in NAMES)
    (http_server.root / "three.checkm").write_text(
        "#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/"
        "mrt-single-file-batch-manifest\n#%fields | nfo:fileUrl | nfo:hashAlgorithm | "
        "nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName\n" + lines + "#%eof\n"
    )
    return f"{http_server.url}/three.checkm"


def failed_count(page, url: str) -> str:
    page.goto(f"{url}/")
    return page.get_attribute("#machine-batch a.node[data-status='Failed']", "data-count")


def test_a_fixed_batch_says_completed_on_every_page(
    admin_page,  # noqa: F811 - the imported fixture
    live_server,
    pipeline,
    http_server,
):
    page, url = admin_page, live_server.url
    bid = pipeline.submit(
        type="single-file-batch-manifest", payload_url=three_file_manifest(http_server)
    )
    assert pipeline.run(bid).status == "Failed"
    assert failed_count(page, url) == "1"

    page.goto(f"{url}/jobs/?status=Failed&batch={bid}")
    page.check("input[data-select-all]")
    page.select_option("form.mq-action-bar select[name=action]", "job.resume")
    page.click("form.mq-action-bar button[value=selected]")
    confirm(page, "the files are there now")
    for name in NAMES:
        (http_server.root / name).write_text(f"{name} at last\n")
    run_until(pipeline, lambda: pipeline.store.batches.get_batch(bid).status == "Completed")

    page.goto(f"{url}/batches/{bid}/")
    assert page.inner_text("h1 .st") == "Completed"
    status = page.inner_text("section:has(h2:text('Status'))")
    assert "3 completed, 0 failed, 0 deleted" in status
    assert "Jobs\n3: 3 Completed" in status or "3 Completed" in status
    report = page.inner_text("section:has(h2:text('Status report'))")
    assert "Failed jobs (0)" in report and "Successful jobs (3)" in report
    timeline = re.sub(r"\s+", " ", page.inner_text("section#timeline"))
    assert "Failed → UpdateReporting" in timeline and "UpdateReporting → Completed" in timeline
    assert "reported again by the queue" in timeline
    assert page.locator("a.action-batchupdate_reporting").count() == 0
    shoot(page, "batch-fixed")

    assert "Completed" in batch_row(page, url, bid)
    assert failed_count(page, url) == "0"
