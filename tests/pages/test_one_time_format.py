"""Issue 32, minor "Polish": every page shows a time one way, in the display zone
(MQ_DISPLAY_TIME_ZONE): "2026-03-10 03:00:00 PDT", never "+0000", "Nov. 27" or "4:05 p.m."."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from steering.models import AdminAction
from tests.pages.test_history_pages import event
from tests.pages.test_pages_batches_jobs import bid, jid, make_batch, make_job
from ui.cells import when

ONE_FORMAT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d P[SD]T")
OTHER_FORMATS = [
    re.compile(r"\+0000"),
    re.compile(r"\b(Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\.? \d"),
    re.compile(r"\d(:\d\d)? ?[ap]\.m\."),
]


@pytest.fixture
def pacific(settings):
    settings.MQ_DISPLAY_TIME_ZONE = "America/Los_Angeles"


def others(page: str) -> list[str]:
    return [m.group(0) for r in OTHER_FORMATS for m in r.finditer(page)]


def test_a_zookeeper_timestamp_reads_as_every_other_time(pacific):
    timezone.activate("America/Los_Angeles")
    try:
        assert when("2026-11-24 18:01:02 +0000") == "2026-11-24 10:01:02 PST"
        assert when("not a time") == "not a time"
    finally:
        timezone.deactivate()


def test_the_pages_show_times_one_way(pacific, client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(root)
    report = {"last_modified": "2026-11-24 18:01:02 +0000", "completed": [], "failed": []}
    make_batch(1, "Completed", status_report=report)
    job = make_job(1, "Completed")
    event(1, 0, "", "Pending", 0)
    AdminAction.objects.create(
        action="job.hold",
        username="ada",
        scope="job",
        reason="r",
        token=uuid.uuid4().hex,
        finished=timezone.now() + timedelta(seconds=3),
    )
    pages = {
        "batch": f"/batches/{bid(1)}/",
        "job": f"/jobs/{jid(1)}/",
        "actions": "/actions/",
        "action": f"/actions/{AdminAction.objects.get().pk}/",
        "admin job": f"/admin/jobs/job/{job.pk}/change/",
        "admin actions": "/admin/steering/adminaction/",
    }
    for name, url in pages.items():
        page = client.get(url).content.decode()
        assert ONE_FORMAT.search(page), name
        assert others(page) == [], (name, others(page))
