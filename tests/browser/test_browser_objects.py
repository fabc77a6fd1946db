"""The object pages in a real browser (Debian's chromium through Playwright), narrow and wide.

As in tests/browser/test_browser.py, ``MQ_SKIP_BROWSER=1`` skips.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from inventory.recorder import LocalInventory
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture
from tests.pages.test_objects_pages import ARK, NOTES, record_brain
from tests.roles import viewer


@pytest.fixture(params=[390, 1400], ids=["phone", "desktop"])
def page(request, browser, live_server, transactional_db):  # noqa: F811 - the imported fixture
    viewer(User.objects.create_user("librarian", password=PASSWORD))
    page = logged_in(browser, live_server.url, "librarian", width=request.param)
    yield page
    page.context.close()


def fits(page) -> bool:
    """Nothing makes the page itself scroll sideways (a wide table scrolls in its own box)."""
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def open_menu(page) -> None:
    """On a phone the navigation is folded behind its Menu button."""
    button = page.locator("label.nav-button")
    if button.is_visible():
        button.click()


def test_from_the_navigation_to_an_object_and_its_versions(page, live_server, tmp_path):
    record_brain(LocalInventory())
    open_menu(page)
    page.click("header.top nav a[href='/objects/']")
    page.wait_for_url("**/objects/")
    assert ARK in page.inner_text("main")
    assert fits(page)
    page.screenshot(path=str(tmp_path / "objects.png"), full_page=True)

    page.fill("#id_q", "brain")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**q=brain**")
    page.click(f"a[href='/objects/{ARK}/']")
    page.wait_for_url(f"**/objects/{ARK}/")
    newest, first = page.locator("details.version#v2"), page.locator("details.version#v1")
    assert newest.get_attribute("open") is not None and first.get_attribute("open") is None
    assert "1 added, 0 replaced, 1 deleted, 4 carried" in newest.locator("summary").inner_text()
    assert newest.locator("tr.deleted-file").inner_text().startswith(NOTES)
    assert newest.locator(".version-files .st-carried").count() == 4
    assert fits(page)
    first.locator("summary").click()
    assert first.locator(".version-files .st-added").first.is_visible()
    page.screenshot(path=str(tmp_path / "object.png"), full_page=True)
    assert (tmp_path / "object.png").stat().st_size > 10_000
