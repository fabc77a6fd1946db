"""The pre-flight on the "Check a manifest" page, in a browser: a depositor picks a profile,
checks a manifest and reads what the batch would do; the page passes axe-core with no
critical or serious violation at a desktop's and a phone's width (issue 36, part 1)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from batches.models import Profile
from door.rights import grant_depositor
from inventory.models import InventoryObject, LocalIdentifier
from jobs.models import Job
from tests.a11y import refused
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401
from tests.pages.test_preservation_preflight import checkm

pytest_plugins = ["tests.httpserver"]


@pytest.fixture
def depositor(transactional_db, settings):
    settings.MQ_BREAKER_THRESHOLD = 0
    settings.MQ_ALLOW_LOOPBACK = True
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    InventoryObject.objects.create(ark="ark:/99999/fk4one", collection="demo", title="One")
    LocalIdentifier.objects.create(collection="demo", local_id="L-1", ark="ark:/99999/fk4one")
    Job.objects.create(jid="jid0000000001", status="Downloading", batch_id="bid0000000001",
                       collection="demo", local_id="L-2", read_at=timezone.now())  # fmt: skip
    grant_depositor(User.objects.create_user("dee", password=PASSWORD), ["demo"])


@pytest.mark.parametrize("width", [1400, 390])
def test_the_preflight_reads_well_and_passes_axe(
    browser,  # noqa: F811 - the imported fixture
    live_server,
    depositor,
    http_server,
    width,
):
    (http_server.root / "a.txt").write_bytes(b"0123456789")
    data = checkm(
        f"{http_server.url_for('/a.txt')} | 10 | a.txt | L-1",
        f"{http_server.url_for('/gone.txt')} | 3 | gone.txt | L-2",
        f"{http_server.url_for('/a.txt')}?again | 10 | b.txt | L-2",
    )
    page = logged_in(browser, live_server.url, "dee", width=width)
    try:
        page.goto(f"{live_server.url}/manifests/check/")
        page.fill("textarea[name=text]", data.decode())
        page.select_option("select[name=profile]", "demo")
        page.click("main form[enctype] button[type=submit]")
        section = page.locator("section.preflight")
        section.wait_for()
        text = section.inner_text()
        assert "3 rows, 3 jobs" in text and "ark:/99999/fk4one" in text
        assert "jid0000000001" in text and "404" in text
        assert page.locator("section.preflight caption").count() == 4
        assert refused(page) == []
    finally:
        page.context.close()
