"""The access queue in a real browser (Debian's chromium through Playwright): the list, a
request's page, its requeue through the confirmation page, pausing a queue; each page
checked by axe-core. ``MQ_SKIP_BROWSER=1`` skips, as the other browser tests."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User

from merritt_queue.project import runtime
from mirror import access as mirrored
from steering.models import OPERATOR
from tests.a11y import refused
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the fixture
from tests.merrittzk_access import MerrittAccess
from tests.pages.test_access_queue_steering import request_in, status_of


@pytest.fixture
def merritt(zk_config, settings, transactional_db):
    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    runtime.close()
    store = runtime.get_store()
    zk = MerrittAccess(store.client)
    zk.init_nodes()
    yield zk
    runtime.close()


@pytest.fixture
def operator_page(browser, live_server, merritt):  # noqa: F811 - the imported fixture
    user = User.objects.create_user("opal", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=OPERATOR)[0])
    page = logged_in(browser, live_server.url, "opal")
    yield page
    page.context.close()


def test_requeue_a_failed_request_and_pause_a_queue_from_the_pages(
    operator_page, live_server, merritt
):
    page, url = operator_page, live_server.url
    key = request_in(merritt, "Failed")
    request_in(merritt, "Completed", "large")
    mirrored.refresh(merritt.zk)
    page.goto(f"{url}/access/")
    assert key in page.inner_text("#access-table")
    assert refused(page) == []
    page.click(f'a:text("{key}")')
    page.wait_for_url(re.compile(rf"/access/{key}/$"))
    assert "assembly broke" in page.inner_text("body")
    assert refused(page) == []
    page.click("a.action-accessrequeue")
    page.wait_for_selector("[data-confirm-open]")
    assert refused(page) == []
    page.fill("textarea#reason", "the storage node is back")
    page.click("form.confirm-form button[type=submit]")
    page.wait_for_url(re.compile(r"/actions/\d+/(\?next=.*)?$"))
    assert "done" in page.inner_text("body")
    assert status_of(merritt, key) == "Pending"

    page.goto(f"{url}/access/")
    page.click('[data-queue="large"] a.action-access-pause')
    page.fill("textarea#reason", "node upgrade")
    page.click("form.confirm-form button[type=submit]")
    page.wait_for_url(re.compile(r"/actions/\d+/(\?next=.*)?$"))
    assert merritt.paused("large") and not merritt.paused("small")
    page.goto(f"{url}/access/")
    assert "paused" in page.inner_text('[data-queue="large"]')


def test_the_access_pages_pass_axe_on_a_phone(browser, live_server, merritt):  # noqa: F811
    key = request_in(merritt, "Failed")
    mirrored.refresh(merritt.zk)
    user = User.objects.create_user("phoebe", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=OPERATOR)[0])
    page = logged_in(browser, live_server.url, "phoebe", width=390)
    try:
        for path in ("/access/", f"/access/{key}/", "/access/?status=Failed&queue=small"):
            page.goto(f"{live_server.url}{path}")
            assert refused(page) == [], path
    finally:
        page.context.close()


def test_the_list_refreshes_itself(operator_page, live_server, merritt):
    page, url = operator_page, live_server.url
    key = request_in(merritt, "Processing")
    mirrored.refresh(merritt.zk)
    page.add_init_script("window.MQ_REFRESH_SECONDS = 1")
    page.goto(f"{url}/access/")
    failed = '[data-queue="small"] a[data-status="Failed"]'
    assert page.get_attribute(failed, "data-count") == "0"
    merritt.set_status(*key.split("/"), "Failed", "the node went away")
    mirrored.refresh(merritt.zk)  # as the follower would
    page.wait_for_function(
        f"document.querySelector('{failed}').dataset.count === '1'", timeout=10_000
    )
    assert "the node went away" in page.inner_text("#access-table")
