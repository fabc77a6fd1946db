"""Every page passes axe-core with no critical or serious violation, at a desktop's and a
phone's width, and a job page can be worked by keyboard alone (issue 32).

An administrator sees the most (action buttons, maintenance, submit), over data like the
demo's: a completed batch and a failed one, an object with versions, a held collection, an
audit entry and a maintenance window. As in tests/browser/test_browser.py,
``MQ_SKIP_BROWSER=1`` skips.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from batches.models import Collection
from inventory.recorder import LocalInventory
from mirror import facade as mirror
from steering.models import ADMINISTRATOR, AdminAction, MaintenanceWindow
from tests.a11y import refused
from tests.browser.test_browser import PASSWORD, TIMEOUT_MS, browser, logged_in  # noqa: F401
from tests.browser.test_browser_steering import collection_action
from tests.pages.test_objects_pages import ARK, record_brain

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

WIDTHS = (1400, 390)


@pytest.fixture
def demo(pipeline, http_server, live_server):
    """A demo's worth of queue, and an administrator's page over it."""
    (http_server.root / "object.txt").write_text("stored\n")
    done = pipeline.submit(type="file", payload_url=f"{http_server.url}/object.txt")
    assert pipeline.run(done).status == "Completed"
    store = pipeline.store
    failed = store.new_batches.create_batch({"batchID": "fix-me", "collection": "demo"}).id
    jid = store.new_jobs.create_job(failed, {"collection": "demo", "title": "A failed object"})
    store.moves.transition_job(jid, "Failed", "404 Not Found: http://127.0.0.1/gone.txt")
    mirror.full_reconcile(store)
    record_brain(LocalInventory())
    Collection.objects.get_or_create(mnemonic="demo")
    user = User.objects.create_user("steerer", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get_or_create(name=ADMINISTRATOR)[0])
    MaintenanceWindow.objects.create(
        scope=MaintenanceWindow.COLLECTION,
        collection="demo",
        start=timezone.now() + timedelta(days=1),
        end=timezone.now() + timedelta(days=1, hours=2),
        reason="storage migration",
        created_by=user,
        created_by_name=user.username,
    )
    (stored,) = pipeline.jobs(done)  # its page shows what each step did
    return {"done": done, "failed": failed, "jid": jid, "stored": stored.jid}


@pytest.fixture
def admin_page(browser, demo, live_server):  # noqa: F811 - the imported fixture
    page = logged_in(browser, live_server.url, "steerer", width=WIDTHS[0])
    yield page
    page.context.close()


def a_resume_run(demo) -> int:
    """A resume run at a pace (steering.runs), for its page and its controls' pages."""
    from steering.runs.starting import Pace, begin

    record, created = AdminAction.objects.get_or_create(
        token="a11y-run",
        defaults={"username": "steerer", "action": "job.resume", "scope": "job", "reason": "a11y"},
    )
    if not created:
        return record.run.pk
    return begin(record, [(demo["jid"], 0)], Pace("in_flight", 2, 0.5, 10)).pk


def pages(demo) -> list[str]:
    """Every page an administrator reaches from the navigation and the items on them."""
    record = AdminAction.objects.latest("pk").pk
    run = a_resume_run(demo)
    return [
        "/jobs/?quarantined=1",
        "/actions/job.resume/confirm?all=1&status=Failed",
        f"/actions/runs/{run}/",
        f"/actions/runs/{run}/pause",
        "/",
        "/jobs/",
        "/jobs/?status=Failed",
        f"/jobs/{demo['jid']}/",
        f"/jobs/{demo['stored']}/",
        "/batches/",
        f"/batches/{demo['done']}/",
        f"/batches/{demo['failed']}/",
        "/objects/",
        f"/objects/{ARK}/",
        "/collections/",
        "/locks/",
        "/consistency/",
        "/windows/",
        "/actions/",
        f"/actions/{record}/",
        f"/actions/job.resume/confirm?ids={demo['jid']}",
        f"/actions/job.edit_resume/{demo['jid']}/",
        "/maintenance/",
        "/submit/",
        "/manifests/check/",
        "/help/roles",
    ]


def report(found: dict[str, list[dict]]) -> str:
    lines = []
    for where, violations in found.items():
        for v in violations:
            lines.append(f"{where}: {v['impact']} {v['rule']} ({v['help']}) at {v['targets']}")
    return "\n".join(lines)


def test_every_page_has_no_critical_or_serious_axe_violation(admin_page, demo, live_server):
    page, url = admin_page, live_server.url
    collection_action(page, url, "collectionhold", "storage migration")  # an audit entry
    found: dict[str, list[dict]] = {}
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for path in pages(demo):
            page.goto(f"{url}{path}")
            if violations := refused(page):
                found[f"{path} at {width} px"] = violations

    anonymous = page.context.browser.new_context(viewport={"width": WIDTHS[1], "height": 900})
    try:
        login = anonymous.new_page()
        login.set_default_timeout(TIMEOUT_MS)
        for width in WIDTHS:
            login.set_viewport_size({"width": width, "height": 900})
            login.goto(f"{url}/accounts/login/")
            if violations := refused(login):
                found[f"/accounts/login/ at {width} px"] = violations
    finally:
        anonymous.close()
    assert not found, "axe-core refuses:\n" + report(found)


def focused(page) -> dict:
    return page.evaluate(
        """() => {
        const e = document.activeElement, s = getComputedStyle(e);
        const r = e.getBoundingClientRect();
        return {text: e.innerText || '', cls: e.className || '', tag: e.tagName,
                inMain: !!e.closest('main') || e.tagName === 'MAIN',
                outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0,
                shown: r.width > 1 && r.height > 1 && r.top >= 0};
    }"""
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_from_a_job_pages_top_the_skip_link_reaches_main_and_resume_soon(
    admin_page, demo, live_server, width
):
    page = admin_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/jobs/{demo['jid']}/")
    page.keyboard.press("Tab")
    skip = focused(page)
    assert "Skip to main content" in skip["text"], skip
    assert skip["shown"] and skip["outline"], "the skip link is seen when it has the focus"

    page.keyboard.press("Enter")
    for tabs in range(1, 6):
        page.keyboard.press("Tab")
        now = focused(page)
        assert now["inMain"], f"Tab {tabs} after the skip link left main: {now}"
        assert now["outline"], f"the focus is not visible on {now}"
        if "action-jobresume" in now["cls"]:
            break
    else:
        pytest.fail("Resume is not within 5 Tabs of the skip link")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-confirm-open]")


def test_a_phones_menu_and_more_filters_open_by_keyboard(admin_page, live_server):
    page = admin_page
    page.set_viewport_size({"width": WIDTHS[1], "height": 900})
    page.goto(f"{live_server.url}/jobs/")
    assert "{#" not in page.inner_text("header.top"), "a template comment shows"
    jobs = page.locator("header.top nav a[href='/batches/']")
    for _ in range(4):  # the skip link, the brand, then the Menu
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "nav-open":
            break
    else:
        pytest.fail("Tab does not reach the phone's Menu")
    assert focused(page)["shown"] or page.locator("label.nav-button").is_visible()
    page.keyboard.press("Space")
    assert jobs.is_visible()

    page.focus("#id_q")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.id") == "mq-more-filters"
    page.keyboard.press("Space")
    assert page.locator(".filters .filter-status").is_visible()
