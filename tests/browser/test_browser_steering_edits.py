"""Editing failed jobs in a real browser: one moved folder fixed for all its jobs in one
edit, reached from the resume that would have failed the same way; and the single edit's
problems shown beside their fields. As tests/browser/test_browser_steering.py; ``MQ_SKIP_BROWSER=1``
skips."""

from __future__ import annotations

from tests.browser.test_browser import browser  # noqa: F401 - the same fixture
from tests.browser.test_browser_steering import admin_page, confirm, run_until, shoot  # noqa: F401

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


def failed_jobs(pipeline, urls: list[str]) -> list:
    bids = [pipeline.submit(type="file", payload_url=u) for u in urls]

    def all_failed():
        found = [j for b in bids for j in pipeline.jobs(b) if j.status == "Failed"]
        return found if len(found) == len(bids) else None

    return run_until(pipeline, all_failed)


def test_a_moved_folder_is_fixed_for_all_its_jobs_from_the_resume_that_warns(
    admin_page,  # noqa: F811
    live_server,
    pipeline,
    http_server,
):
    page, url = admin_page, live_server.url
    names = ("a.txt", "b.txt", "c.txt")
    jobs = failed_jobs(pipeline, [f"{http_server.url}/old/{n}" for n in names])
    (http_server.root / "new").mkdir()
    for name in names:
        (http_server.root / "new" / name).write_text(f"{name} moved\n")

    page.goto(f"{url}/jobs/?status=Failed")
    page.check("input[data-select-all]")
    page.select_option("form.mq-action-bar select[name=action]", "job.resume")
    page.click("form.mq-action-bar button[value=selected]")
    page.wait_for_selector("[data-confirm-open]")
    warning = page.inner_text(".same-cause")
    assert "3 of these jobs failed the same way" in warning and "likely fail" in warning
    shoot(page, "resume-same-cause")
    page.click(".same-cause a")

    page.wait_for_selector("form.edit-jobs-form")
    assert all(j.jid in page.inner_text("table.edit-jobs") for j in jobs)
    shoot(page, "bulk-edit-form")
    page.fill("#id_url_from", f"{http_server.url}/old/")
    page.fill("#id_url_to", f"{http_server.url}/new/")
    page.click("form.edit-jobs-form button[type=submit]")
    page.wait_for_selector("[data-confirm-open]")
    changes = page.inner_text("table.bulk-changes")
    assert all(f"{http_server.url}/new/{n}" in changes for n in names)
    shoot(page, "bulk-edit-confirm")
    confirm(page, "the depositor moved the folder")
    assert "3 done" in page.inner_text(".counts")

    run_until(
        pipeline,
        lambda: all(pipeline.store.jobs.get_job(j.jid).status == "Completed" for j in jobs),
        timeout=120,
    )


def test_the_edit_form_shows_each_problem_beside_its_field(
    admin_page,  # noqa: F811
    live_server,
    pipeline,
    http_server,
):
    page, url = admin_page, live_server.url
    (job,) = failed_jobs(pipeline, [f"{http_server.url}/gone.txt"])
    page.goto(f"{url}/actions/job.edit_resume/{job.jid}/")
    options = page.locator("select#id_digest_type option").all_inner_texts()
    assert options == ["(none)", "md5", "sha1", "sha256", "sha512"]
    page.select_option("select#id_digest_type", "md5")
    page.fill("#id_digest_value", "abc")
    page.click("form.edit-job-form button[type=submit]")
    row = page.locator("tr", has=page.locator("#id_digest_value"))
    assert "32 hexadecimal" in row.inner_text()
    assert "hexadecimal" not in page.locator("tr", has=page.locator("#id_payload_url")).inner_text()
    shoot(page, "edit-field-errors")
