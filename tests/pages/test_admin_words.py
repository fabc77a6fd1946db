"""Issue 32, minor "Polish": the Django admin says "Batches", and a job's or batch's admin
page links to its page in the app."""

from __future__ import annotations

import pytest
from django.utils import timezone

from batches.models import Batch
from jobs.models import Job
from tests.pages.test_pages_batches_jobs import bid, jid


@pytest.fixture
def root(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


def test_the_admin_says_batches(root):
    index = root.get("/admin/").content.decode()
    assert "Batches" in index and "Batchs" not in index


@pytest.mark.parametrize("kind", ["job", "batch"])
def test_an_items_admin_page_links_to_its_page_in_the_app(root, kind):
    now = timezone.now()
    if kind == "job":
        item = Job.objects.create(jid=jid(1), status="Failed", read_at=now)
        page_url = f"/jobs/{jid(1)}/"
    else:
        item = Batch.objects.create(bid=bid(1), status="Failed", read_at=now)
        page_url = f"/batches/{bid(1)}/"
    change = root.get(f"/admin/{item._meta.app_label}/{kind}/{item.pk}/change/")
    text = change.content.decode()
    assert "View on site" in text
    start = text.index("viewsitelink")
    link = text[text.rindex('href="', 0, start) + 6 :]
    link = link[: link.index('"')]
    assert root.get(link).url.endswith(page_url)
