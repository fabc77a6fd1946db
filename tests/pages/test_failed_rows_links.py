"""The batch page offers the failed-rows round trip only where it means something: a batch of
rows with failed jobs, and its upload only to an operator who may act on the batch's
collection."""

from __future__ import annotations

import pytest

from steering.models import CollectionScope
from tests.pages.test_pages_batches_jobs import bid, make_batch
from tests.pages.test_steering_actions import people  # noqa: F401

pytestmark = pytest.mark.django_db


def page(client, user, n: int) -> str:
    client.force_login(user)
    return client.get(f"/batches/{bid(n)}/").content.decode()


def test_no_failed_rows_section_for_a_batch_without_failed_jobs(client, people):  # noqa: F811
    make_batch(1, "Completed", type="batch-manifest", job_counts={"Completed": 3})
    make_batch(2, "Failed", type="batch-manifest", job_counts={"Completed": 2, "Failed": 1})
    assert 'id="failed-rows"' not in page(client, people["operator"], 1)
    assert 'id="failed-rows"' in page(client, people["operator"], 2)


def test_the_upload_is_offered_only_within_the_operators_collections(client, people):  # noqa: F811
    make_batch(1, "Failed", type="batch-manifest", job_counts={"Failed": 1}, collection="other")
    CollectionScope.objects.create(user=people["operator"], collections=["demo"])
    shown = page(client, people["operator"], 1)
    assert "Download failed rows" in shown and "Upload corrections" not in shown
    CollectionScope.objects.filter(user=people["operator"]).update(collections=["other"])
    assert "Upload corrections" in page(client, people["operator"], 1)
