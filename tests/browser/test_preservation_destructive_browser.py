"""A destructive update decided in a real browser (Debian's chromium through Playwright): the
job page shows the diff and passes axe (desktop and phone), the operator approves it through
the confirmation page with a reason, and the job goes on to store its version. As in
tests/browser/test_browser.py, ``MQ_SKIP_BROWSER=1`` skips.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from steering.models import OPERATOR
from tests.a11y import refused
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the fixture
from tests.browser.test_browser_steering import confirm, run_until
from tests.pipeline.test_objects_pipeline import storage
from tests.pipeline.test_preservation_destructive import first_version, submit_update

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


@pytest.fixture(params=[1400, 390], ids=["desktop", "phone"])
def operator_page(request, browser, live_server, pipeline, settings):  # noqa: F811
    settings.MQ_DESTRUCTIVE_REVIEW = True
    user = User.objects.create_user("reviewer", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=OPERATOR)[0])
    page = logged_in(browser, live_server.url, "reviewer", width=request.param)
    yield page
    page.context.close()


def test_an_operator_reads_the_diff_and_approves_the_update(
    operator_page, live_server, pipeline, http_server
):
    page, url = operator_page, live_server.url
    ark = first_version(pipeline, http_server, "web", {"a.txt": b"a\n", "b.txt": b"b\n"})
    bid, job = submit_update(
        pipeline, http_server, "web", {"c.txt": b"c\n", "mrt-delete.txt": b"a.txt\n"}
    )
    assert job.status == "Held"
    page.goto(f"{url}/jobs/?awaiting=1")
    assert job.jid in page.inner_text("main")
    page.goto(f"{url}/jobs/{job.jid}/")
    section = page.locator("section#review")
    assert "Awaiting approval" in section.inner_text()
    assert "producer/a.txt" in section.inner_text()
    assert refused(page) == []
    page.click("a.action-jobapprove_update")
    confirm(page, "the depositor asked to drop a.txt")
    run_until(pipeline, lambda: pipeline.store.batches.get_batch(bid).status == "Completed")
    assert storage(pipeline).versions(ark) == [1, 2]
    page.goto(f"{url}/jobs/{job.jid}/")
    assert "approved" in page.locator("section#review").inner_text()
    assert refused(page) == []
