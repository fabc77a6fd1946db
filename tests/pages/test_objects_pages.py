"""The inventory's record of what each version changed, and the object pages that show it."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from batches.management.commands import load_demo
from inventory.models import InventoryFile, InventoryObject, InventoryVersion
from inventory.recorder import LocalInventory
from inventory.tables import object_url
from jobs.models import Job
from merritt_queue.services.errors import InventoryError
from notifications.models import WEBHOOK, Subscription
from tests.roles import viewer

ARK = "ark:/99999/fk4brain"
OTHER = "ark:/99999/fk4husky"
V1_JOB, V2_JOB, OTHER_JOB = "jid0000000001", "jid0000000002", "jid0000000003"
TIFS = ["producer/brain_398.tif", "producer/brain_492.tif", "producer/brain_508.tif"]
TIFS.append("producer/brain_604.tif")
NOTES = "producer/notes.txt"


def file(name: str, change: str = "", size: int = 1000, **extra) -> dict:
    return {"name": name, "size": size, "sha256": f"{len(name):064x}", "change": change, **extra}


def record_brain(inventory: LocalInventory) -> None:
    """v1 adds four images and notes; v2 carries the images, adds brain.tif, deletes notes."""
    inventory.bind_local_id("demo", "brain", ARK)
    inventory.record(
        ark=ARK,
        version=1,
        job_id=V1_JOB,
        collection="demo",
        files=[file(n, "added") for n in TIFS] + [file(NOTES, "added", 10)],
        metadata={"erc_what": "Brain", "erc_who": "UCSF"},
        mode="add",
    )
    inventory.record(
        ark=ARK,
        version=2,
        job_id=V2_JOB,
        collection="demo",
        files=[file(n, "carried") for n in TIFS] + [file("producer/brain.tif", "added", 600)],
        metadata={"erc_what": "Brain"},
        deleted=[NOTES],
        mode="update",
    )


@pytest.fixture
def inventory(db):
    inventory = LocalInventory()
    record_brain(inventory)
    inventory.bind_local_id("other", "husky", OTHER)
    inventory.record(
        ark=OTHER,
        version=1,
        job_id=OTHER_JOB,
        collection="other",
        files=[file("producer/huskyChicken.jpg", "added", 5000, md5="", mime_type="")],
        metadata={"erc_what": "Husky Chicken"},
        mode="add",
    )
    return inventory


@pytest.fixture
def browser(client, django_user_model):
    client.force_login(viewer(django_user_model.objects.create_user("librarian")))
    return client


def listed(response) -> list[str]:
    return [row.record.ark for row in response.context["table"].paginated_rows]


def text_of(response) -> str:
    """The page's text without tags or repeated spaces, for phrases split over elements."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


# --- recording -------------------------------------------------------------------------


def test_each_version_keeps_its_mode_deleted_names_and_per_file_changes(inventory):
    v1, v2 = InventoryVersion.objects.filter(obj__ark=ARK).order_by("number")
    assert (v1.mode, v1.deleted, v1.file_count, v1.total_size) == ("add", [], 5, 4010)
    assert (v1.added_count, v1.replaced_count, v1.carried_count) == (5, 0, 0)
    assert (v2.mode, v2.deleted, v2.file_count, v2.total_size) == ("update", [NOTES], 5, 4600)
    assert (v2.added_count, v2.replaced_count, v2.carried_count) == (1, 0, 4)
    changes = dict(v2.files.values_list("name", "change"))
    assert changes == {**dict.fromkeys(TIFS, "carried"), "producer/brain.tif": "added"}
    obj = InventoryObject.objects.get(ark=ARK)
    assert obj.version_count == 2 and obj.last_stored == v2.stored
    assert (obj.title, obj.creator) == ("Brain", "UCSF")


def test_recording_the_same_version_again_writes_nothing(inventory):
    before = (InventoryVersion.objects.count(), InventoryFile.objects.count())
    again = inventory.record(
        ark=ARK,
        version=2,
        job_id=V2_JOB,
        collection="demo",
        files=[file("producer/other.tif", "added")],
        deleted=["producer/brain.tif"],
        mode="update",
    )
    assert again is False
    assert (InventoryVersion.objects.count(), InventoryFile.objects.count()) == before
    v2 = InventoryVersion.objects.get(obj__ark=ARK, number=2)
    assert v2.deleted == [NOTES] and v2.added_count == 1
    assert InventoryObject.objects.get(ark=ARK).version_count == 2
    with pytest.raises(InventoryError, match=f"already holds {ARK} version 2 from job {V2_JOB}"):
        inventory.record(ark=ARK, version=2, job_id="jid0000000099", collection="demo", files=[])


def test_recording_a_first_version_again_writes_nothing(inventory):
    row = InventoryObject.objects.values_list("collection", "version_count", "title")
    before = row.get(ark=ARK)
    files = [file("producer/other.tif", "added")]
    again = inventory.record(ark=ARK, version=1, job_id=V1_JOB, collection="x", files=files)
    assert again is False
    assert row.get(ark=ARK) == before
    assert InventoryVersion.objects.get(obj__ark=ARK, number=1).file_count == 5
    with pytest.raises(InventoryError, match=f"already holds {ARK} version 1 from job {V1_JOB}"):
        inventory.record(ark=ARK, version=1, job_id="jid0000000099", collection="demo", files=[])


@pytest.mark.parametrize("version", [1, 2])
def test_a_version_naming_a_file_twice_is_refused_and_nothing_is_written(db, version):
    twice = [file("producer/a.txt", "added"), file("producer/a.txt", "added", 7)]
    with pytest.raises(InventoryError, match=f"{ARK} version {version} could not be recorded"):
        LocalInventory().record(
            ark=ARK, version=version, job_id=V1_JOB, collection="demo", files=twice
        )
    assert not InventoryObject.objects.exists() and not InventoryVersion.objects.exists()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"files": [file("a.txt", "moved")]}, "file 'a.txt' has change 'moved'; it must be one of"),
        ({"files": [], "mode": "replace"}, "mode 'replace' is neither add nor update"),
        ({"files": [], "deleted": [""]}, "deleted names must be non-empty file names"),
        ({"files": [], "deleted": "a.txt\nb.txt"}, "deleted must be a list of names, not the"),
    ],
)
def test_a_change_the_pages_cannot_show_is_refused_and_nothing_is_written(db, kwargs, message):
    with pytest.raises(InventoryError, match=message) as refused:
        LocalInventory().record(ark=ARK, version=1, job_id=V1_JOB, collection="demo", **kwargs)
    assert f"{ARK} version 1" in str(refused.value)
    assert not InventoryObject.objects.exists() and not InventoryVersion.objects.exists()


def test_files_without_change_md5_or_mime_are_recorded_blank(db):
    LocalInventory().record(
        ark=ARK,
        version=1,
        job_id=V1_JOB,
        collection="demo",
        files=[{"name": "a", "size": 1, "sha256": "0" * 64, "md5": None}],
    )
    version = InventoryVersion.objects.get()
    assert (version.mode, version.deleted, version.added_count) == ("", [], 0)
    assert InventoryFile.objects.values_list("change", "md5", "mime_type").get() == ("", "", "")


@pytest.mark.django_db(transaction=True)
def test_the_migration_counts_old_versions_and_leaves_their_changes_blank():
    executor = MigrationExecutor(connection)
    executor.migrate([("inventory", "0001_initial")])
    old = executor.loader.project_state([("inventory", "0001_initial")]).apps
    obj = old.get_model("inventory", "InventoryObject").objects.create(ark=ARK)
    lonely = old.get_model("inventory", "InventoryObject").objects.create(ark=OTHER)
    versions = old.get_model("inventory", "InventoryVersion")
    for number in (1, 2):
        stored = timezone.now().replace(microsecond=0, year=2020, month=number)
        row = versions.objects.create(obj=obj, number=number, job_id=V1_JOB, stored=stored)
    old.get_model("inventory", "InventoryFile").objects.create(version=row, name="a", size=1)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    obj = InventoryObject.objects.get(ark=ARK)
    assert obj.version_count == 2 and obj.last_stored == row.stored
    lonely = InventoryObject.objects.get(ark=OTHER)
    assert (lonely.version_count, lonely.last_stored) == (0, None)
    version = InventoryVersion.objects.get(obj=obj, number=2)
    assert (version.mode, version.deleted) == ("", [])
    assert (version.added_count, version.replaced_count, version.carried_count) == (0, 0, 0)
    assert InventoryFile.objects.get().change == ""


# --- the object list -------------------------------------------------------------------


def test_the_list_shows_each_object_newest_stored_first(browser, inventory):
    response = browser.get("/objects/")
    assert response.status_code == 200
    assert listed(response) == [OTHER, ARK]
    body = response.content.decode()
    assert f'<a href="/objects/{ARK}/">{ARK}</a>' in body
    row = re.search(rf"<tr><td class=\"c-ark\"[^>]*><a href=\"/objects/{ARK}/\">.*?</tr>", body)
    assert row, body
    cells = re.findall(r'<td class="c-(\w+)"[^>]*>(.*?)</td>', row.group(0))
    assert dict(cells)["title"] == "Brain"
    assert dict(cells)["collection"] == "demo"
    assert dict(cells)["local_ids"] == "brain"
    assert dict(cells)["version_count"] == "2"
    assert "2 objects" in body


@pytest.mark.parametrize(
    "query, expected",
    [
        ("collection=demo", [ARK]),
        ("collection=other", [OTHER]),
        ("collection=nowhere", []),
        (f"q={ARK}", [ARK]),
        ("q=husky", [OTHER]),  # a local id
        ("q=brain", [ARK]),  # a local id, though titles hold it too
        ("q=chicken", [OTHER]),  # in a title
        ("q=CHICK&collection=demo", []),
        ("sort=version_count", [OTHER, ARK]),
        ("sort=-version_count", [ARK, OTHER]),
        ("sort=ark", [ARK, OTHER]),
        ("sort=-collection", [OTHER, ARK]),
    ],
)
def test_the_list_filters_searches_and_sorts(browser, inventory, query, expected):
    response = browser.get(f"/objects/?{query}")
    assert response.status_code == 200
    assert listed(response) == expected


def test_a_title_search_is_counted_as_it_reads_the_text_index(browser, inventory):
    body = browser.get("/objects/?q=Chicken").content.decode()
    assert '<p class="count">1 object</p>' in body


def test_the_list_escapes_titles(browser, db):
    LocalInventory().record(
        ark=ARK,
        version=1,
        job_id=V1_JOB,
        collection="demo",
        files=[],
        metadata={"erc_what": "<script>alert(1)</script>"},
    )
    body = browser.get("/objects/").content.decode()
    assert "<script>alert" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_the_navigation_offers_objects(browser, db):
    assert '<a href="/objects/">Objects</a>' in browser.get("/jobs/").content.decode()


# --- one object ------------------------------------------------------------------------


def test_the_object_page_shows_its_versions_newest_first_with_what_changed(browser, inventory):
    response = browser.get(f"/objects/{ARK}/")
    assert response.status_code == 200
    assert [v.row.number for v in response.context["versions"]] == [2, 1]
    text = text_of(response)
    assert "Version 2" in text and text.index("Version 2") < text.index("Version 1")
    assert "update · 1 added, 0 replaced, 1 deleted, 4 carried" in text
    assert "add · 5 added, 0 replaced, 0 deleted, 0 carried" in text
    body = response.content.decode()
    assert f'<a href="/jobs/{V2_JOB}/">{V2_JOB}</a>' in body
    assert f'<a href="/jobs/{V1_JOB}/">{V1_JOB}</a>' in body
    assert "Local ids brain" in text and "Creator UCSF" in text
    v2 = body[body.index('id="v2"') : body.index('id="v1"')]
    assert v2.count('<span class="st st-carried">carried</span>') == 4
    assert v2.count('<span class="st st-added">added</span>') == 1
    assert re.search(
        rf'<td class="c-name">{NOTES}</td>\s*<td><span class="st st-deleted">deleted</span>', v2
    )
    assert "4.5\xa0KB (4600 bytes)" in v2
    v1 = body[body.index('id="v1"') :]
    assert v1.count('<span class="st st-added">added</span>') == 5
    assert 'st-deleted">deleted</span></td>' not in v1


def test_a_version_recorded_before_changes_were_kept_says_so(browser, inventory):
    InventoryVersion.objects.filter(number=1).update(mode="", added_count=0)
    InventoryFile.objects.filter(version__number=1).update(change="")
    text = text_of(browser.get(f"/objects/{ARK}/"))
    assert "Version 1 · " in text and "changes not recorded" in text
    assert "recorded before the inventory kept what versions change" in text


def test_an_unknown_ark_is_a_404_that_says_so(browser, inventory):
    response = browser.get("/objects/ark:/99999/fk4nothing/")
    assert response.status_code == 404
    assert "The inventory holds no object ark:/99999/fk4nothing" in text_of(response)


def test_object_urls_quote_what_is_not_a_path(browser, db):
    odd = "ark:/99999/fk4?a#b c"
    LocalInventory().record(ark=odd, version=1, job_id=V1_JOB, collection="demo", files=[])
    url = object_url(odd)
    assert url == "/objects/ark:/99999/fk4%3Fa%23b%20c/"
    assert browser.get(url).context["obj"].ark == odd


@pytest.mark.parametrize("url", ["/objects/", f"/objects/{ARK}/"])
def test_anonymous_users_are_sent_to_the_login_page(client, inventory, url):
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith("/accounts/login/?next=")


# --- the job page ----------------------------------------------------------------------


def make_job(jid: str, ark: str) -> Job:
    now = timezone.now()
    return Job.objects.create(jid=jid, status="Completed", ark=ark, last_modified=now, read_at=now)


def test_the_job_page_links_its_ark_to_the_object_page_once_it_is_in_the_inventory(
    browser, inventory
):
    make_job(V2_JOB, ARK)
    make_job("jid0000000007", "ark:/99999/fk4notyet")
    body = browser.get(f"/jobs/{V2_JOB}/").content.decode()
    assert f'<dt>ARK</dt><dd><a href="/objects/{ARK}/">{ARK}</a></dd>' in body
    body = browser.get("/jobs/jid0000000007/").content.decode()
    assert "<dt>ARK</dt><dd>ark:/99999/fk4notyet</dd>" in body


# --- the demo's update stage -----------------------------------------------------------


@pytest.fixture
def demo(process_store, tmp_path, monkeypatch, settings):
    settings.MQ_ALLOW_LOOPBACK = True  # as `make demo`: its receiver is on 127.0.0.1
    monkeypatch.setattr(load_demo, "SECRET_FILE", tmp_path / "demo-receiver.secret")

    def run(*args) -> str:
        out = io.StringIO()
        call_command("load_demo", *args, stdout=out, stderr=out)
        return out.getvalue()

    return run


def submission_of(store, batch_id: str) -> dict:
    return store.batches.get_batch(store.batches.find_batch_by_uuid(batch_id)).submission


def test_the_demo_submits_brain_v1_with_its_local_id(demo, process_store, tmp_path):
    out = demo("--content-dir", str(tmp_path / "content"))
    assert "demo-brain-v1: submitted as bid" in out
    v1 = submission_of(process_store, "demo-brain-v1")
    assert (v1["type"], v1["local_id"], v1["submission_mode"]) == ("container", "brain", "add")
    assert v1["payload_url"] == "http://127.0.0.1:8001/brain_v1.zip"
    assert (tmp_path / "content" / "brain_v2.zip").is_file()
    assert process_store.batches.find_batch_by_uuid("demo-brain-v2") is None
    # The demo's receiver is given the id and secret of its own subscription.
    hooked = Subscription.objects.get(batch_uuid="demo-object-manifest", channel=WEBHOOK)
    assert load_demo.SECRET_FILE.read_text().split() == [str(hooked.pk), hooked.secret]


def test_the_demo_update_waits_for_the_stored_first_version_then_submits_once(demo, process_store):
    record_brain(LocalInventory())
    out = demo("--updates", "--wait", "600")
    assert "local id 'brain' is stored; submitting its update" in out
    assert "demo-brain-v2: submitted as bid" in out
    v2 = submission_of(process_store, "demo-brain-v2")
    assert (v2["local_id"], v2["submission_mode"]) == ("brain", "update")
    assert v2["payload_url"] == "http://127.0.0.1:8001/brain_v2.zip"
    again = demo("--updates", "--wait", "600")
    assert "demo-brain-v2: already there" in again


def test_a_second_demo_says_its_update_is_there_and_does_not_claim_to_submit_it(
    demo, process_store
):
    record_brain(LocalInventory())
    demo("--updates", "--wait", "600")
    again = demo("--updates", "--wait", "0")
    assert "submitting" not in again, again
    assert "demo-brain-v2: already there as bid" in again


def test_the_demo_update_says_when_its_wait_ran_out_and_submits(demo, process_store):
    out = demo("--updates", "--wait", "0")
    assert "waited 0 s and local id 'brain' is not stored yet (batch demo-brain-v1: not found)" in (
        out
    )
    assert "demo-brain-v2: submitted as bid" in out


def test_the_demo_update_does_not_wait_for_a_first_version_whose_batch_is_over(
    demo, process_store, tmp_path
):
    demo("--content-dir", str(tmp_path / "content"))
    bid = process_store.batches.find_batch_by_uuid("demo-brain-v1")
    process_store.batch_moves.hold_batch(bid)
    process_store.batch_moves.delete_batch(bid)
    out = demo("--updates", "--wait", "600")
    assert "batch demo-brain-v1 is Deleted without storing local id 'brain'" in out
    assert "demo-brain-v2: submitted as bid" in out
