"""A collection release's confirmation page says what releasing it adds to the work ahead,
from the same code as the dashboard (ui.ahead): the jobs its hold caught, their bytes and
the time at the last hour's rate (issue 34, part 8)."""

from __future__ import annotations

from django.core.cache import cache

from tests.pages import test_collection_release as release
from tests.pages.test_steering_pages import confirm_and_execute
from ui.ahead import release_previews

queue, people, held = release.queue, release.people, release.held  # the same fixtures


def test_the_release_confirmation_previews_what_the_release_adds(client, queue, people, held):
    cache.clear()
    client.force_login(people["administrator"])
    page, _, _ = confirm_and_execute(
        client, "collection.release", "ids=demo", reason="migration over"
    )
    body = page.content.decode()
    assert 'class="release-preview" data-collection="demo" data-jobs="1" data-bytes="0"' in body
    assert (
        "Releasing demo adds to the work ahead: +1 job, 0\xa0bytes known (1 not sized yet)" in body
    )
    assert "not at the current rate" in body  # nothing finished in the last hour
    assert "its 1 held batch add jobs not known yet" in body


def test_release_all_previews_every_held_job(client, queue, people, held):
    preview = release_previews(["demo"], by_hold_only=False)["demo"]
    assert (preview.jobs, preview.batches) == (1, 2)
    caught = release_previews(["demo"], by_hold_only=True)["demo"]
    assert (caught.jobs, caught.batches) == (1, 1)
