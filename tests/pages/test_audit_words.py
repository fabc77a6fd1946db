"""Issue 32, minor "The audit list": actions in words, a dry run told plainly, the selection
decoded, and what a collection's hold did said in words."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from steering.models import AdminAction, AdminActionItem
from tests.roles import viewer


def action(name: str, **fields) -> AdminAction:
    fields = {"username": "ada", "scope": "job", "reason": "why", "total": 1, "done": 1} | fields
    return AdminAction.objects.create(
        action=name, token=uuid.uuid4().hex, finished=timezone.now(), **fields
    )


@pytest.fixture
def reader(client, django_user_model):
    client.force_login(viewer(django_user_model.objects.create_user("vera")))
    return client


def row_of(page: str, pk: int) -> str:
    start = page.index(f'data-action="{pk}"')
    return page[start : page.index("</tr>", start)]


def test_the_audit_list_names_actions_in_words_and_marks_a_dry_run(reader):
    edit = action("job.edit_resume")
    dry = action("cleanup", scope="queue", params={"older_than": "7d", "dry_run": True})
    real = action("cleanup", scope="queue", params={"older_than": "7d", "dry_run": False})
    page = reader.get("/actions/").content.decode()
    assert "Edit and resume (job)" in row_of(page, edit.pk)
    assert ">job.edit_resume<" not in page
    assert "dry run" in row_of(page, dry.pk) and "Clean up" in row_of(page, dry.pk)
    assert "dry run" not in row_of(page, real.pk)
    assert '<option value="job.edit_resume">Edit and resume (job)</option>' in page


def test_a_dry_runs_own_page_says_so_in_its_heading(reader):
    dry = action("cleanup", scope="queue", params={"older_than": "7d", "dry_run": True})
    page = reader.get(f"/actions/{dry.pk}/").content.decode()
    heading = page[page.index("<h1>") : page.index("</h1>")]
    assert "dry run" in heading


def test_the_selection_is_shown_decoded(reader):
    bulk = action("job.resume", selection="status=Failed&collection=demo%20two&q=a%2Fb")
    page = reader.get(f"/actions/{bulk.pk}/").content.decode()
    assert "status: Failed; collection: demo two; q: a/b" in page
    assert "%20" not in page and "%2F" not in page


def test_a_collection_holds_result_says_what_happened(reader):
    hold = action("collection.hold", scope="collection")
    AdminActionItem.objects.create(admin_action=hold, item_id="demo", result="done", detail="done")
    again = action("collection.hold", scope="collection")
    AdminActionItem.objects.create(
        admin_action=again, item_id="demo", result="done", detail="already so"
    )
    page = reader.get(f"/actions/{hold.pk}/").content.decode()
    assert "The collection was put on hold." in page
    assert "<td>done</td>" not in page
    assert (
        "The collection was already on hold."
        in reader.get(f"/actions/{again.pk}/").content.decode()
    )


def test_a_batch_a_release_let_go_shows_its_own_move_not_the_collections(reader):
    """A release's caught items are recorded beside the collection (part of it), each with its
    move: before, the collection's words stood on the batch's row too ("The collection's hold
    was lifted.")."""
    release = action("collection.release", scope="collection", total=2, done=2)
    AdminActionItem.objects.create(
        admin_action=release, item_id="demo", result="done", detail="done; released 1 item(s)"
    )
    AdminActionItem.objects.create(
        admin_action=release,
        item_id="bid0000000009",
        part_of="demo",
        collection="demo",
        before_status="Held",
        after_status="Pending",
        before_version=1,
        after_version=2,
        result="done",
        detail="released from Held",
    )
    page = reader.get(f"/actions/{release.pk}/").content.decode()
    row = page[page.index('data-item="bid0000000009"') :]
    row = row[: row.index("</tr>")]
    assert "hold was lifted" not in row and "st-pending" in row, row
