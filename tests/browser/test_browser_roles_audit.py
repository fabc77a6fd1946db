"""Issue 32's minor findings on roles, the audit list and purged items, as a person sees them
in a real browser (Debian's chromium through Playwright). ``MQ_SKIP_BROWSER=1`` skips."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import Group, User
from django.utils import timezone

from jobs.models import JobEvent
from steering.models import AdminAction, AdminActionItem
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture
from tests.pages.test_pages_batches_jobs import bid, jid


def test_an_account_with_no_role_is_told_so_and_whom_to_ask(browser, live_server):  # noqa: F811
    boss = User.objects.create_user("boss", email="boss@example.org")
    boss.groups.add(Group.objects.get_or_create(name="administrator")[0])
    User.objects.create_user("newcomer", password=PASSWORD)
    page = logged_in(browser, live_server.url, "newcomer")
    try:
        text = page.inner_text("main")
        assert "You have no role yet" in text and "boss@example.org" in text
        page.goto(f"{live_server.url}/jobs/")
        assert "You have no role yet" in page.inner_text("main")
    finally:
        page.context.close()


def test_a_librarian_reads_the_audit_and_a_purged_jobs_page_in_words(browser, live_server):  # noqa: F811
    vera = User.objects.create_user("vera", password=PASSWORD)
    vera.groups.add(Group.objects.get_or_create(name="viewer")[0])
    now = timezone.now()
    JobEvent.objects.create(jid=jid(1), bid=bid(1), to_status="Completed", at=now, exact=True)
    for dry in (True, False):
        record = AdminAction.objects.create(
            action="cleanup",
            username="cleanup",
            scope="queue",
            reason="old items",
            params={"older_than": "7d", "dry_run": dry},
            token=uuid.uuid4().hex,
            finished=now,
        )
        AdminActionItem.objects.create(admin_action=record, item_id=bid(1), result="done")
    page = logged_in(browser, live_server.url, "vera")
    try:
        page.goto(f"{live_server.url}/actions/")
        rows = page.locator("table.audit tbody tr")
        assert rows.count() == 2
        words = [rows.nth(i).inner_text() for i in range(2)]
        assert sum("dry run" in w for w in words) == 1 and all("Clean up" in w for w in words)
        answer = page.goto(f"{live_server.url}/jobs/{jid(1)}/")
        assert answer.status == 404
        text = page.inner_text("main")
        assert "was removed from the queue" in text and "the scheduled cleanup" in text
    finally:
        page.context.close()
