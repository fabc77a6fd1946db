"""A job removed from the queue long ago, as a librarian finds it in a real browser: the list's
search finds it by its ARK, marked removed, and its page says when and by what, with no action
offered. ``MQ_SKIP_BROWSER=1`` skips."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.contrib.auth.models import Group, User
from django.utils import timezone

from steering.models import AdminAction, AdminActionItem
from tests.a11y import refused
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture
from tests.pages.test_pages_batches_jobs import bid, jid, make_batch, make_job


def test_a_librarian_finds_a_removed_job_and_reads_its_page(browser, live_server):  # noqa: F811
    otto = User.objects.create_user("otto", password=PASSWORD)
    otto.groups.add(Group.objects.get_or_create(name="operator")[0])
    gone = timezone.now() - timedelta(days=400)
    make_batch(1, "Completed", removed_at=gone)
    make_job(1, "Completed", removed_at=gone)
    make_job(2, "Failed")
    record = AdminAction.objects.create(
        action="cleanup",
        username="system",
        scope="queue",
        reason="retention",
        token=uuid.uuid4().hex,
        finished=gone,
    )
    AdminActionItem.objects.create(admin_action=record, item_id=bid(1), result="done")
    page = logged_in(browser, live_server.url, "otto")
    try:
        page.goto(f"{live_server.url}/jobs/?q=ark:/99999/fk4j1")
        row = page.locator("table tbody tr", has_text=jid(1))
        assert row.count() == 1 and "removed" in row.inner_text()
        assert not refused(page), refused(page)
        page.goto(f"{live_server.url}/jobs/{jid(1)}/")
        text = page.inner_text("main")
        assert "Removed from the queue" in text and "the scheduled cleanup" in text
        assert f"with its batch {bid(1)}" in text
        assert page.locator("a[href*='/actions/job.']").count() == 0
        assert not refused(page), refused(page)
    finally:
        page.context.close()
