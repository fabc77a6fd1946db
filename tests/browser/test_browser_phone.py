"""A phone (390 px wide): the navigation folds into a Menu button that opens without script,
and the roles, list and confirmation pages fit the width. Screenshots go to
``$MQ_SHOTS_DIR`` when it is set, to be looked at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from tests.browser.test_browser import PASSWORD, browser, fill_mirror, logged_in  # noqa: F401

PHONE = 390


def shoot(page, name: str) -> None:
    folder = os.environ.get("MQ_SHOTS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=f"{folder}/{name}.png", full_page=True)


def fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


@pytest.fixture
def operator(transactional_db):
    user = User.objects.create_user("olive", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    return user


def test_the_navigation_folds_into_a_menu_on_a_phone(browser, live_server, operator):  # noqa: F811
    page = logged_in(browser, live_server.url, "olive", width=PHONE)
    try:
        page.goto(f"{live_server.url}/help/roles")
        actions = page.locator("header.top nav a[href='/actions/']")
        assert not actions.is_visible()
        assert fits(page)
        shoot(page, "roles-390-closed")
        page.click("label.nav-button")
        assert actions.is_visible()
        shoot(page, "roles-390-menu")
        actions.click()
        page.wait_for_url(f"{live_server.url}/actions/")
    finally:
        page.context.close()


def test_the_navigation_is_one_row_on_a_desktop(browser, live_server, operator):  # noqa: F811
    page = logged_in(browser, live_server.url, "olive", width=1400)
    try:
        page.goto(f"{live_server.url}/help/roles")
        assert not page.locator("label.nav-button").is_visible()
        assert page.locator("header.top nav a[href='/actions/']").is_visible()
        shoot(page, "roles-1400")
    finally:
        page.context.close()


def test_a_list_and_a_confirmation_fit_a_phone(browser, live_server, operator):  # noqa: F811
    fill_mirror()
    page = logged_in(browser, live_server.url, "olive", width=PHONE)
    try:
        page.goto(f"{live_server.url}/jobs/")
        shoot(page, "jobs-390")
        page.goto(f"{live_server.url}/actions/job.resume/confirm?ids=jid0000000001")
        shoot(page, "confirm-390")
        assert fits(page), "the confirmation page is wider than the phone"
    finally:
        page.context.close()


def test_a_phone_shows_the_search_and_folds_the_other_filters(browser, live_server, operator):  # noqa: F811
    """The filters filled a phone's first screen; the list came after them (issue 16)."""
    fill_mirror()
    page = logged_in(browser, live_server.url, "olive", width=PHONE)
    try:
        page.goto(f"{live_server.url}/jobs/")
        status = page.locator(".filters .filter-status")
        assert page.locator(".filters #id_q").is_visible() and not status.is_visible()
        assert "More filters" not in page.locator(".filters").inner_text().replace(
            page.locator(".filters label.more-button").inner_text(), "", 1
        ), "no template text leaks into the form"
        assert page.locator("table tbody tr").first.bounding_box()["y"] < 900
        page.click(".filters label.more-button")
        assert status.is_visible()
        # A list opened with another filter set shows the filters open.
        page.goto(f"{live_server.url}/jobs/?status=Failed")
        assert status.is_visible()
    finally:
        page.context.close()


def test_a_desktop_shows_every_filter(browser, live_server, operator):  # noqa: F811
    fill_mirror()
    page = logged_in(browser, live_server.url, "olive", width=1400)
    try:
        page.goto(f"{live_server.url}/jobs/")
        assert page.locator(".filters .filter-status").is_visible()
        assert not page.locator(".filters label.more-button").is_visible()
    finally:
        page.context.close()
