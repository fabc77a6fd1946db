"""Two-person deletion in a real browser (issue 36): one administrator deletes a failed job
and gets a request, a second finds it from the dashboard, reads what will go and approves it;
every page passes axe-core. ``MQ_SKIP_BROWSER=1`` skips."""

from __future__ import annotations

import re

from django.contrib.auth.models import Group, User

from steering.models import DeletionRequest
from tests.a11y import refused
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture
from tests.pages.test_steering_actions import job_in
from tests.pages.test_steering_pages import mirrored


def administrator(name: str) -> User:
    user = User.objects.create_user(name, password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="administrator")[0])
    return user


def test_one_requests_another_approves(browser, live_server, process_store, settings):  # noqa: F811
    settings.MQ_TWO_PERSON_DELETION = ["jobs"]
    administrator("ada"), administrator("bea")
    jid = job_in(process_store, "Failed")
    mirrored(process_store, jid)
    url = live_server.url

    ada = logged_in(browser, url, "ada")
    try:
        ada.goto(f"{url}/actions/job.delete/confirm?ids={jid}")
        assert "second administrator" in ada.inner_text("main")
        assert not refused(ada), refused(ada)
        ada.fill("textarea#reason", "a duplicate of another deposit")
        ada.click("form.confirm-form button[type=submit]")
        ada.wait_for_url(re.compile(r"/deletion-requests/\d+/$"))
        text = ada.inner_text("main")
        assert jid in text and "you requested it" in text
        assert ada.locator("button", has_text="Approve").count() == 0
        assert not refused(ada), refused(ada)
    finally:
        ada.context.close()
    assert process_store.jobs.get_job(jid).status == "Failed"

    bea = logged_in(browser, url, "bea")
    try:
        bea.click("#deletion-requests a")
        bea.wait_for_url(f"{url}/deletion-requests/")
        assert not refused(bea), refused(bea)
        bea.click("table.deletion-requests a")
        assert jid in bea.inner_text("table.request-items")
        assert not refused(bea), refused(bea)
        bea.fill("textarea#reason", "checked: the other deposit holds it")
        bea.click("button:has-text('Approve and delete')")
        bea.wait_for_url(re.compile(r"/actions/\d+/$"))
        assert "1 done" in bea.inner_text("main")
    finally:
        bea.context.close()
    assert process_store.jobs.get_job(jid).status == "Deleted"
    assert DeletionRequest.objects.get().state == "approved"
