"""The submit and check pages as a depositor sees them in a real browser (issue 32): a bad
manifest refused at the door with the check page's table, a taken batchID answered with what
became of its batch and the way on, the form kept. As in tests/browser/test_browser.py,
``MQ_SKIP_BROWSER=1`` skips.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from batches.models import Profile
from door.rights import grant_depositor
from door.submission import submit
from merritt_queue.project import runtime
from mirror import facade as mirror
from tests.browser.test_browser import PASSWORD, browser, logged_in  # noqa: F401 - the same fixture
from tests.door.test_submit_door import BAD, FILES


@pytest.fixture
def queue(zk_config, settings, tmp_path, transactional_db):
    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    settings.MQ_WORK_DIR = str(tmp_path / "work")
    runtime.close()
    store = runtime.get_store()
    store.init()
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    yield store
    runtime.close()


@pytest.fixture
def depositor_page(browser, live_server, queue):  # noqa: F811 - the imported fixture
    user = User.objects.create_user("depositor", password=PASSWORD)
    grant_depositor(user, ["demo"])
    page = logged_in(browser, live_server.url, "depositor")
    page.goto(f"{live_server.url}/submit/")
    yield page
    page.context.close()


def manifest(text: str, name: str = "m.checkm") -> dict:
    return {"name": name, "mimeType": "text/plain", "buffer": text.encode()}


def test_a_bad_manifest_is_refused_at_the_door_with_the_check_pages_table(
    depositor_page, queue, tmp_path
):
    page = depositor_page
    assert page.title() == "Submit a batch · Merritt queue"
    assert page.input_value("#id_profile") == "demo"  # the only one: chosen
    page.select_option("#id_type", label="One object, by its manifest")
    page.set_input_files("#id_file", manifest(BAD))
    page.click("main form[enctype] button[type=submit]")
    refused = page.locator("#manifest-refused")
    refused.wait_for()
    row = refused.locator("table.findings tbody tr").first.inner_text()
    assert row.split("\t")[:2] == ["4", "nfo:hashValue"] and "not hexadecimal" in row
    assert "Nothing was submitted" in refused.inner_text()
    assert "m.checkm is kept for your next try" in page.inner_text("#kept-upload")
    assert page.input_value("#id_type") == "object-manifest"  # kept
    page.screenshot(path=str(tmp_path / "refused.png"), full_page=True)
    assert queue.batches.list_batch_ids() == []


def test_a_failed_batchs_id_again_says_so_links_it_and_runs_it_again(
    depositor_page, queue, live_server
):
    page = depositor_page
    first = submit(
        {
            "profile": "demo",
            "type": "file",
            "payload_url": "https://example.org/a.jpg",
            "batchID": "b-1",
        },
        by=User.objects.get(username="depositor"),
    ).bid
    queue.batch_moves.transition_batch(first, "Processing", "checking the submission")
    queue.batch_moves.transition_batch(first, "Failed", "no jobs were created: line 4: bad digest")
    mirror.full_reconcile(queue)

    page.select_option("#id_type", label="One file")
    page.fill("#id_payload_url", "https://example.org/a-corrected.jpg")
    page.fill("#id_batchID", "b-1")
    page.fill("#id_erc_what", "Motel Capri")
    page.click("main form[enctype] button[type=submit]")
    earlier = page.locator("#earlier-batch")
    earlier.wait_for()
    text = earlier.inner_text()
    assert "Failed" in text and "line 4: bad digest" in text and "Run again" in text
    assert earlier.locator(f"a[href='/batches/{first}/']").count() >= 1
    assert page.input_value("#id_erc_what") == "Motel Capri"  # nothing typed is lost
    assert page.input_value("#id_batchID") == "b-1"

    page.check("#id_rerun")
    page.click("main form[enctype] button[type=submit]")
    page.wait_for_selector("text=Batch submitted as")
    (again,) = [b for b in queue.batches.list_batch_ids() if b != first]
    assert queue.batches.get_batch(again).uuid == "b-1~rerun-1"
    assert queue.batches.get_batch(again).submission["payload_url"].endswith("a-corrected.jpg")


def test_the_check_page_keeps_the_upload_and_says_which_type(depositor_page, live_server):
    page = depositor_page
    page.goto(f"{live_server.url}/manifests/check/")
    page.set_input_files("input[name=file]", manifest(FILES, "rows.checkm"))
    page.select_option("select[name=type]", label="One object, by its manifest")
    page.click("main form[enctype] button[type=submit]")
    page.wait_for_selector("#type-to-pick")
    assert "pick the type “A batch of files”" in page.inner_text("#type-to-pick")
    assert "https://h.example.org/a.jpg | a.jpg | x" in page.input_value("textarea[name=text]")
    assert "rows.checkm" in page.inner_text("main")
