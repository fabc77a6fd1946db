"""Approval before a batch starts (issue 36, part 1) in a real browser: an operator finds the
awaiting batch from the dashboard, reads its summary, approves it with a reason, and the batch
then runs to Completed; the pages pass axe-core. ``MQ_SKIP_BROWSER=1`` skips, as elsewhere."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from door import arrival
from steering.models import OPERATOR
from tests.a11y import refused
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the fixture
from tests.browser.test_browser_steering import confirm, run_until

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]


@pytest.fixture
def operator_page(browser, live_server, pipeline, monkeypatch):  # noqa: F811 - the fixture
    pipeline.profile.approval_required = True
    pipeline.profile.save()
    monkeypatch.setattr(arrival, "summarise", lambda data, **kw: {"objects": 1, "files": 1})
    user = User.objects.create_user("olga", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=OPERATOR)[0])
    page = logged_in(browser, live_server.url, "olga")
    yield page
    page.context.close()


def test_an_operator_approves_an_awaiting_batch_and_it_runs(
    operator_page, live_server, pipeline, http_server
):
    page, url = operator_page, live_server.url
    (http_server.root / "object.txt").write_text("approved, then ingested\n")
    bid = pipeline.submit(type="file", payload_url=f"{http_server.url}/object.txt")
    assert pipeline.store.batches.get_batch(bid).awaiting_approval
    pipeline.step()  # a sweep and a burst of the workers: nothing of it runs while it waits
    assert pipeline.store.batches.get_batch(bid).status == "Held"

    page.goto(f"{url}/")
    page.click('#act-on a[data-status="awaiting"]')
    page.click(f"text={bid}")
    assert "Awaiting approval" in page.inner_text("h1")
    assert "Pre-flight: what this batch would do" in page.inner_text("#approval")
    assert refused(page) == []

    page.click("a.action-batchapprove")
    assert refused(page) == []
    confirm(page, "the summary is as agreed")
    run_until(pipeline, lambda: pipeline.store.batches.get_batch(bid).status == "Completed")
    page.goto(f"{url}/batches/{bid}/")
    assert "approved by olga: the summary is as agreed" in page.inner_text("#timeline")
