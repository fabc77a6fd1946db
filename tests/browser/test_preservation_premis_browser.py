"""The object page's PREMIS links in a real browser (Debian's chromium through Playwright):
a librarian finds the export of the object and of a version on the page, which passes axe,
and following a link gives the document, valid against the schema. As in
tests/browser/test_browser.py, ``MQ_SKIP_BROWSER=1`` skips.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.a11y import refused
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the fixture
from tests.pages.test_objects_pages import ARK
from tests.pages.test_preservation_premis import (  # noqa: F401 - the history fixture
    events,
    history,
    validated,
)
from tests.roles import viewer


@pytest.fixture(params=[1400, 390], ids=["desktop", "phone"])
def page(request, browser, live_server, transactional_db):  # noqa: F811 - the imported fixture
    viewer(User.objects.create_user("librarian", password=PASSWORD))
    page = logged_in(browser, live_server.url, "librarian", width=request.param)
    yield page
    page.context.close()


def test_the_object_page_links_each_premis_export(page, live_server, history):  # noqa: F811
    page.goto(f"{live_server.url}/objects/{ARK}/")
    assert refused(page) == []
    assert page.locator("a.premis-export").count() == 3  # the object, and its two versions
    # The closed version's link is out of the way (its details are folded), the rest named.
    assert page.get_by_role("link", name="PREMIS (XML)").count() == 2
    newest = page.locator("details.version#v2 a.premis-export")
    assert newest.is_visible()
    with page.expect_response(lambda r: r.url.endswith("/versions/2/premis.xml")) as answer:
        newest.click()
    assert answer.value.status == 200
    doc = validated(answer.value.body())
    assert {e["id"].split("/")[0] for e in events(doc) if e["id"].startswith("jid")} == {
        "jid0000000002"
    }

    page.goto(f"{live_server.url}/objects/{ARK}/")
    whole = page.locator("dl.kv a.premis-export").first
    with page.expect_response(lambda r: r.url.endswith(f"{ARK}/premis.xml")) as answer:
        whole.click()
    kinds = {e["type"] for e in events(validated(answer.value.body()))}
    assert {"hold", "release", "resume", "deletion", "fixity check"} <= kinds
