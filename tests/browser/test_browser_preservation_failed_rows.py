"""Failed rows, round trip, in a real browser: from the batch page, the failed rows
downloaded, corrected and uploaded; the preview (checked by axe) lists the change and the
refused row; confirmed, the job resumes. As tests/browser/test_browser_steering.py;
``MQ_SKIP_BROWSER=1`` skips."""

from __future__ import annotations

from tests.a11y import refused
from tests.browser.test_browser import browser  # noqa: F401 - the same fixture
from tests.browser.test_browser_steering import admin_page, confirm, run_until, shoot  # noqa: F401
from tests.pipeline.test_pipeline_e2e import md5

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


def test_the_batch_page_downloads_failed_rows_and_previews_the_corrections(
    admin_page,  # noqa: F811
    live_server,
    pipeline,
    content,
):
    page, url = admin_page, live_server.url
    digest = md5("call911.jpg")
    good = f"{content.url}/call911.jpg | md5 | {digest} |  |  | call911.jpg |  | r1 |  | A | "
    gone = f"{content.url}/gone.jpg |  |  |  |  | gone.jpg |  | r2 |  | B | "
    (content.root / "b.checkm").write_text(
        "#%checkm_0.7\n"
        "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest\n"
        "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | "
        "nfo:fileLastModified | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier | "
        f"mrt:creator | mrt:title | mrt:date\n{good}\n{gone}\n#%eof\n"
    )
    bid = pipeline.submit(type="single-file-batch-manifest", payload_url=f"{content.url}/b.checkm")
    batch = pipeline.run(bid)
    assert batch.status == "Failed", batch.message

    page.goto(f"{url}/batches/{bid}/")
    link = page.get_by_role("link", name="Download failed rows")
    text = page.request.get(url + link.get_attribute("href")).text()
    assert "failed at Downloading" in text and "gone.jpg" in text
    fixed = text.replace(f"{content.url}/gone.jpg", f"{content.url}/4blocks.jpg")
    fixed = fixed.replace(
        "#%eof", f"{content.url}/tumbleBug.jpg |  |  |  |  | t.jpg |  | r9 |  |  | \n#%eof"
    )

    page.get_by_role("link", name="Upload corrections").click()
    page.set_input_files(
        "input[name=manifest]",
        files=[{"name": "fixed.checkm", "mimeType": "text/plain", "buffer": fixed.encode()}],
    )
    page.click("form.corrections-form button[type=submit]")
    page.wait_for_selector("[data-confirm-open]")
    table = page.inner_text("table.corrections")
    assert f"{content.url}/4blocks.jpg" in table and "Estimating" in table
    assert "no failed job of this batch matches this row" in page.inner_text(".refused-rows")
    assert refused(page) == []
    shoot(page, "failed-rows-preview")
    confirm(page, "the depositor moved the file")
    assert "1 done" in page.inner_text(".counts")
    run_until(pipeline, lambda: pipeline.store.batches.get_batch(bid).status == "Completed")
